"""A shared corpus of FAKE secrets, each in a realistic context, plus text that must survive.

Used by tests/test_redact.py (every secret disappears) and by the LLM tests (no secret ever
reaches a request body, a cache row or a summary). None of these values is a real credential;
they only have the right shape.

``SECRETS`` rows are (kind, secret, context). ``kind`` is the ``[REDACTED:<KIND>]`` we expect,
or None where several kinds are acceptable (e.g. a key inside an Authorization header).
"""

from __future__ import annotations

from typing import NamedTuple


class Secret(NamedTuple):
    kind: str | None
    secret: str
    context: str


_PEM_BODY = (
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
    "LxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo\n"
)
_PEM = "-----BEGIN RSA PRIVATE KEY-----\n" + _PEM_BODY + "-----END RSA PRIVATE KEY-----"
_OPENSSH = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACDmJ7vHq3Xc0QjZkq8Qm6fQ2m0yq5C3s8s3Pp0Wc1u8WwAAAJgZ0w9bGdMP\n"
    "-----END OPENSSH PRIVATE KEY-----"
)
_JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
    "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)

SECRETS: tuple[Secret, ...] = (
    Secret(
        "OPENAI_KEY",
        "sk-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ",
        "export key sk-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ now",
    ),
    Secret(
        "OPENAI_KEY",
        "sk-proj-Zx9Qm2Lk7Vb4Nc1Xs8Dw3Ef6Gh0Jk5Lp9Oi2Uy7Tr4Ew1Qa3Sd6Fg8Hj0Kl",
        'client = OpenAI(api_key="sk-proj-Zx9Qm2Lk7Vb4Nc1Xs8Dw3Ef6Gh0Jk5Lp9Oi2Uy7Tr4Ew1Qa3Sd6Fg8Hj0Kl")',
    ),
    Secret(
        "ANTHROPIC_KEY",
        "sk-ant-api03-Qw3rTy8UiOp2AsDf6GhJk1LzXc9VbNm4Qw7ErTy0UiOp5AsDf-aBcDeFgAA",
        "ANTHROPIC key is sk-ant-api03-Qw3rTy8UiOp2AsDf6GhJk1LzXc9VbNm4Qw7ErTy0UiOp5AsDf-aBcDeFgAA.",
    ),
    Secret(
        "OPENROUTER_KEY",
        "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",
        "I used 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 for routing",
    ),
    Secret(
        "GITHUB_TOKEN",
        "ghp_4Tq9Lm2Xv8Rb6Nc1Zs7Kd3Wf5Hj0Gp9Ya2Ue",
        "git clone https://ghp_4Tq9Lm2Xv8Rb6Nc1Zs7Kd3Wf5Hj0Gp9Ya2Ue@github.com/acme/app",
    ),
    Secret(
        "GITHUB_TOKEN",
        "gho_16C7e42F292c6912E7710c838347Ae178B4a",
        "oauth token gho_16C7e42F292c6912E7710c838347Ae178B4a",
    ),
    Secret(
        "GITHUB_TOKEN",
        "github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789ab",
        "token: github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789ab",
    ),
    Secret(
        "SLACK_TOKEN",
        "xoxb-2048-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "SLACK: xoxb-2048-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    ),
    Secret(
        "SLACK_TOKEN",
        "xoxp-1111-2222-3333-abcdef0123456789",
        "user token xoxp-1111-2222-3333-abcdef0123456789 expired",
    ),
    Secret("AWS_ACCESS_KEY", "AKIAIOSFODNN7EXAMPLE", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE"),
    Secret(
        "AWS_SECRET_KEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    Secret(
        None,
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzzzzzzzKEY",
        "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYzzzzzzzKEY",
    ),
    Secret(
        "GOOGLE_API_KEY",
        "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
        "https://maps.googleapis.com/maps/api/js?key=AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
    ),
    Secret(
        "HF_TOKEN",
        "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
        "huggingface-cli login --token hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
    ),
    Secret(
        "STRIPE_KEY",
        "sk_live_51H8xYzAbCdEfGhIjKlMnOpQr",
        "stripe.api_key = 'sk_live_51H8xYzAbCdEfGhIjKlMnOpQr'",
    ),
    Secret("STRIPE_KEY", "rk_test_4eC39HqLyjWDarjtT1zdp7dc", "restricted rk_test_4eC39HqLyjWDarjtT1zdp7dc"),
    Secret("JWT", _JWT, f"the session cookie value was {_JWT} and it expired"),
    Secret(
        None,
        "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA",
        "curl -H 'Authorization: Bearer Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA' https://api.example.com",
    ),
    Secret(
        "BEARER_TOKEN",
        "ya29.a0AfH6SMBx3Kq9Lm2Xv8Rb6Nc1Zs7Kd3Wf",
        "sent bearer ya29.a0AfH6SMBx3Kq9Lm2Xv8Rb6Nc1Zs7Kd3Wf to the API",
    ),
    Secret("AUTH_HEADER", "dXNlcjpodW50ZXIyMjI=", "Authorization: Basic dXNlcjpodW50ZXIyMjI="),
    Secret(None, "a1b2c3d4e5f6a7b8c9d0", '{"headers": {"X-Api-Key": "a1b2c3d4e5f6a7b8c9d0"}}'),
    Secret("PASSWORD", "hunter2", "mysql -u root password=hunter2"),
    Secret("PASSWORD", "Tr0ub4dor&3", "passwd: Tr0ub4dor&3"),
    Secret(
        "PASSWORD",
        "correct horse battery staple",
        '{"username": "ada", "password": "correct horse battery staple"}',
    ),
    Secret("PASSWORD", "s3cr3t-pw", "DB_PASSWORD='s3cr3t-pw'"),
    Secret("PASSWORD", "letmein99", "psql --password letmein99"),
    Secret("PRIVATE_KEY", _PEM_BODY.splitlines()[1], f"Here is the key:\n{_PEM}\nkeep it safe"),
    Secret(
        "PRIVATE_KEY",
        "QyNTUxOQAAACDmJ7vHq3Xc0QjZkq8Qm6fQ2m0yq5C3s8s3Pp0Wc1u8WwAAAJgZ0w9bGdMP",
        f"cat ~/.ssh/id_ed25519\n{_OPENSSH}\n",
    ),
    Secret(
        "PRIVATE_KEY",
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj",
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n[output truncated]",
    ),
    Secret(
        "CONNECTION_STRING", "pg-Pa55word", "DATABASE_URL is postgres://app:pg-Pa55word@db.internal:5432/prod"
    ),
    Secret(
        "CONNECTION_STRING",
        "my$qlPw",
        "engine = create_engine('mysql+pymysql://root:my$qlPw@localhost/shop')",
    ),
    Secret(
        "CONNECTION_STRING",
        "m0ng0Secret",
        "mongodb+srv://admin:m0ng0Secret@cluster0.ab1cd.mongodb.net/test?retryWrites=true",
    ),
    Secret("CONNECTION_STRING", "r3disPass", "REDIS at redis://:r3disPass@cache:6379/0 is up"),
    Secret("CONNECTION_STRING", "rabbitPw1", "amqp://guest:rabbitPw1@mq.local:5672/"),
    Secret(
        "CONNECTION_STRING",
        "hTTpPass",
        "pip install --index-url https://deploy:hTTpPass@pypi.corp.example/simple pkg",
    ),
    Secret(
        "COOKIE",
        "sessionid=8f14e45fceea167a5a36dedd4bea2543",
        "Cookie: sessionid=8f14e45fceea167a5a36dedd4bea2543; csrftoken=abc",
    ),
    Secret(
        "COOKIE",
        "__Host-sid=Qm9vbGVhbjEyMzQ1Njc4OQ",
        "Set-Cookie: __Host-sid=Qm9vbGVhbjEyMzQ1Njc4OQ; Path=/; Secure; HttpOnly",
    ),
    Secret("ENV_SECRET", "0123abcd4567ef89", "MY_SERVICE_TOKEN=0123abcd4567ef89"),
    Secret("ENV_SECRET", "plainvalue-not-random", "export WEBHOOK_SECRET=plainvalue-not-random"),
    Secret(None, "qwertyuiop1234567890", "OPENWEATHER_API_KEY=qwertyuiop1234567890 python fetch.py"),
    Secret(
        "TELEGRAM_TOKEN",
        "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq",
        "TELEGRAM_BOT_TOKEN set; calling https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq/getMe",
    ),
    Secret(
        "TOKEN",
        "9f8e7d6c5b4a39281706f5e4d3c2b1a0",
        "GET /download?file=report.pdf&token=9f8e7d6c5b4a39281706f5e4d3c2b1a0 HTTP/1.1",
    ),
    Secret(
        None,
        "Xy7Gh3Kl9Qw2Er5Ty8Ui1Op4As6Df0Gh",
        "https://hooks.example.com/cb?secret=Xy7Gh3Kl9Qw2Er5Ty8Ui1Op4As6Df0Gh&id=3",
    ),
    Secret(
        None,
        "Lk8Jh7Gf6Ds5Aq4Ws3Ed2Rf1Tg0Yh9Uj",
        'config = {"client_secret": "Lk8Jh7Gf6Ds5Aq4Ws3Ed2Rf1Tg0Yh9Uj"}',
    ),
)

#: Ordinary developer text that must come out of ``redact`` unchanged.
BENIGN: tuple[str, ...] = (
    "commit 3f9a1c2e7b4d6f8a0e5c9b3d7f1a2e4c6b8d0f2a fixed the password reset flow",
    "We discussed the password reset flow and the token refresh logic.",
    "request id 123e4567-e89b-12d3-a456-426614174000 failed",
    "edited /home/ada/projects/ledger/src/ledger/export.py and tests/test_export.py",
    "litellm.completion(model='gpt-4o', max_tokens=4000, temperature=0)",
    "MAX_TOKENS=4096 and CHUNK_TOKENS=6000 in settings",
    "The API key is read from os.environ['OPENAI_API_KEY'] at runtime.",
    "OPENAI_API_KEY=$OPENAI_API_KEY pytest -q",
    "password=None  # default, prompt interactively",
    "Use a Bearer token in the header; never log it.",
    "pip install scikit-learn sk-learn-helpers",
    "sorted(items, key=lambda x: x.name)",
    "http://localhost:8080/v1/chat/completions returned 200",
    "git@github.com:acme/app.git",
    "sha256 cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    "12:30:45 build finished in 3.2s",
    "The cookie banner and the session cookie policy were updated.",
    "Set SECRET_KEY in your .env file (see README).",
    "def login(user: str, password: str) -> Token:",
    "task-management-service-deployment-v2 rolled out",
)

#: Formats added for issue 16 (gitleaks / detect-secrets / trufflehog rule sets, CJK labels, a second
#: label). Kept apart from ``SECRETS`` because recorded LLM cassettes were made from that tuple.
MORE_SECRETS: tuple[Secret, ...] = (
    Secret('PASSWORD', 'Tr0ub4dor&3x',
           '数据库配置好了：主机 10.0.0.5，用户 app，密码：Tr0ub4dor&3x，端口 5432'),
    Secret('PASSWORD', 'hunter2-cn',
           '服务器口令是 hunter2-cn，别外传'),
    Secret('PASSWORD', 'Kx9$mQ2vLp',
           '对象存储的密钥=Kx9$mQ2vLp；明天轮换'),
    Secret('PASSWORD', 'Pw-7731-jp',
           '管理画面のパスワード: Pw-7731-jp を使ってください'),
    Secret('PASSWORD', 'Harbor2031+',
           '这样了，密码Harbor2031+'),
    Secret('PYPI_TOKEN', 'pypi-AgEIcHlwaS5vcmcU89K1D5a0HECbLMQsNcCGctd76LCNUH1lS-2wLfKkaVE_tNMO66iv9b4_b8p6k-csDZVef',
           'twine upload dist/* -u __token__ -p pypi-AgEIcHlwaS5vcmcU89K1D5a0HECbLMQsNcCGctd76LCNUH1lS-2wLfKkaVE_tNMO66iv9b4_b8p6k-csDZVef'),
    Secret('DISCORD_TOKEN', 'MQPzMuEGQ80YRP10eougTfIh.pazOc6.1hVRd82Wzj5OSqplLapHp6hgPjr',
           "client.run('MQPzMuEGQ80YRP10eougTfIh.pazOc6.1hVRd82Wzj5OSqplLapHp6hgPjr')  # the bot token"),
    Secret('DISCORD_TOKEN', 'mfa.A_Hd0T4ygzyFemk-nQA9iRLewJZljdX4WSwSHo3gRhq8h2vgwyYgbeDV-ErDQXjuwR5R26moNzk2ejZoy5KY',
           'old user token mfa.A_Hd0T4ygzyFemk-nQA9iRLewJZljdX4WSwSHo3gRhq8h2vgwyYgbeDV-ErDQXjuwR5R26moNzk2ejZoy5KY still works'),
    Secret('DISCORD_WEBHOOK', 'https://discord.com/api/webhooks/112233445566778899/X0eZ776Hehdz2GXnBo1nKo63sZEqqZ3CYxU-w0A2c_MLpjN-E8A4r_knOh7k-gQvmUZK',
           'curl -X POST https://discord.com/api/webhooks/112233445566778899/X0eZ776Hehdz2GXnBo1nKo63sZEqqZ3CYxU-w0A2c_MLpjN-E8A4r_knOh7k-gQvmUZK -d \'{"content":"deployed"}\''),
    Secret('AZURE_KEY', 'YiCy6AbaCQYAhIcXhsCAIdB89Sr6wnyclVKmtexpDSA3lxl7kettuA1fToZ0HpXyT4V3cSykBX0hB0RfZScs1E==',
           'AZURE_STORAGE_CONNECTION_STRING="DefaultEndpointsProtocol=https;AccountName=acmelogs;AccountKey=YiCy6AbaCQYAhIcXhsCAIdB89Sr6wnyclVKmtexpDSA3lxl7kettuA1fToZ0HpXyT4V3cSykBX0hB0RfZScs1E==;EndpointSuffix=core.windows.net"'),
    Secret('AZURE_KEY', 'Xb3+Jm9/Qr1sT5vW7yZ2aC4eG6iK8mO0qS2uW4yA6cE=',
           'Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=Xb3+Jm9/Qr1sT5vW7yZ2aC4eG6iK8mO0qS2uW4yA6cE='),
    Secret('TWILIO_KEY', 'SKa5c1c1ce140569d01304a29e4d9d2419',
           "client = Client('SKa5c1c1ce140569d01304a29e4d9d2419', api_secret, account_sid)"),
    Secret('SENDGRID_KEY', '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',
           "sg = SendGridAPIClient('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')"),
    Secret('TOKEN', '695755cb24064d289daac6a7e00b0edd',
           'credential: token: 695755cb24064d289daac6a7e00b0edd'),
    Secret('SLACK_TOKEN', 'xapp-1-A0F7JP8PBLC-2435707235765-a79d0d06d40640367c80e1a9aa771948ab372f1978c491bc06b2aabd973624d5',
           'SocketModeHandler(app, "xapp-1-A0F7JP8PBLC-2435707235765-a79d0d06d40640367c80e1a9aa771948ab372f1978c491bc06b2aabd973624d5").start()'),
    Secret('GITLAB_TOKEN', 'gldt-qzuB7FAs2KemDVLDhnbl',
           'git clone https://gitlab+deploy-token:gldt-qzuB7FAs2KemDVLDhnbl@gitlab.com/acme/app.git'),
    Secret('GITLAB_TOKEN', 'glrt-museX3UNDuwRSY1EM0tS',
           'gitlab-runner register --token glrt-museX3UNDuwRSY1EM0tS'),
    Secret('SHOPIFY_TOKEN', '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',
           'X-Shopify-Access-Token: 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'),
    Secret('SQUARE_TOKEN', 'sq0atp-A3nI3EPj26FVJUO4lFRbFl',
           'square access token sq0atp-A3nI3EPj26FVJUO4lFRbFl for sandbox'),
    Secret('DIGITALOCEAN_TOKEN', 'dop_v1_e9b5b2caf443bc961a985b994ddc0899ebf9aa91e5fbd602af081ffbc79cac8a',
           'doctl auth init -t dop_v1_e9b5b2caf443bc961a985b994ddc0899ebf9aa91e5fbd602af081ffbc79cac8a'),
    Secret('RUBYGEMS_TOKEN', 'rubygems_8626b9530d9fbb66d5c929f6e197e1c13a266cee3e302bb8',
           ':rubygems_api_key: rubygems_8626b9530d9fbb66d5c929f6e197e1c13a266cee3e302bb8'),
    Secret('DOCKER_TOKEN', 'dckr_pat_o_HlF3Bt-gfKcvaumxXYrUntkbj',
           'echo dckr_pat_o_HlF3Bt-gfKcvaumxXYrUntkbj | docker login -u acme --password-stdin'),
    Secret('ATLASSIAN_TOKEN', 'ATATT3xFfGF0egb7Xb4Va5BpoBeYIivaMIkUbagzArE36G4WK6NawEO5GHrWnn-71vUFYvlI',
           'jira token ATATT3xFfGF0egb7Xb4Va5BpoBeYIivaMIkUbagzArE36G4WK6NawEO5GHrWnn-71vUFYvlI for ada@acme.io'),
    Secret('LINEAR_KEY', 'lin_api_VQxkUEC9d96WtGxLlE04wCDdW42oQ6Y4as4qQ3v5',
           'linear client with lin_api_VQxkUEC9d96WtGxLlE04wCDdW42oQ6Y4as4qQ3v5'),
    Secret('NOTION_TOKEN', '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',
           'notion = Client(auth="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")'),
    Secret('DATABRICKS_TOKEN', 'dapi966a3b70770d8666bae47e559b563daf',
           'databricks configure --host https://adb-1.azuredatabricks.net with dapi966a3b70770d8666bae47e559b563daf'),
    Secret('DOPPLER_TOKEN', 'dp.pt.ZvJL355xAw2POuN2ZlCe24CEWQfsX0njMIh6rVneD2d',
           'doppler configure set token dp.pt.ZvJL355xAw2POuN2ZlCe24CEWQfsX0njMIh6rVneD2d'),
    Secret('FIGMA_TOKEN', 'figd_oEaN2rc_gmMX3JdsTzNlPm1fHt4P34Z2UP2YwLC_',
           'figma personal access token figd_oEaN2rc_gmMX3JdsTzNlPm1fHt4P34Z2UP2YwLC_'),
    Secret('GRAFANA_TOKEN', 'glsa_OmmtHxrDVFT6fypttV6VSNDHGf9Erw1V_f19ecd25',
           'grafana service account glsa_OmmtHxrDVFT6fypttV6VSNDHGf9Erw1V_f19ecd25'),
    Secret('GRAFANA_TOKEN', 'glc_MkOCw7ikHWLYs+180yrkog9qFE3G0zwIQI2Ha8BFjlA/8x/mNoRmDfNaXxU1',
           'grafana cloud glc_MkOCw7ikHWLYs+180yrkog9qFE3G0zwIQI2Ha8BFjlA/8x/mNoRmDfNaXxU1'),
    Secret('VAULT_TOKEN', 'hvs.7pgSA5Fjduxq-2IIdojekgVup4q6tKkdeWJLKM107lNdZx98dX7kbfueXaEj7bUIDd_3wslT_1-Tnek1JhSEhi3rzA',
           'vault login hvs.7pgSA5Fjduxq-2IIdojekgVup4q6tKkdeWJLKM107lNdZx98dX7kbfueXaEj7bUIDd_3wslT_1-Tnek1JhSEhi3rzA'),
    Secret('TERRAFORM_TOKEN', 'wwxoFPJTLZAMEM.atlasv1.7ljWH1MbCqlj0BPzEdSBHhrwEgHJVwFd_JgG7T29UxT--Fq5_f3THtt4oyrJ8u3fUrp',
           'credentials "app.terraform.io" { token = "wwxoFPJTLZAMEM.atlasv1.7ljWH1MbCqlj0BPzEdSBHhrwEgHJVwFd_JgG7T29UxT--Fq5_f3THtt4oyrJ8u3fUrp" }'),
    Secret('POSTMAN_KEY', 'PMAK-f3e19b55f4fd7ef26f01aeae-72a387c5291877e5bc7453ec7603787e97',
           'postman api key PMAK-f3e19b55f4fd7ef26f01aeae-72a387c5291877e5bc7453ec7603787e97'),
    Secret('PULUMI_TOKEN', 'pul-c9a79eb3977583d142b53213c1ce986b94007a72',
           'pulumi login with pul-c9a79eb3977583d142b53213c1ce986b94007a72'),
    Secret('SENTRY_TOKEN', 'sntrys_PxD0qheSvbC9uURCNdEsGsLj5JQSaF60APEVHYyDU3QxdcQaI9wxxvMgfSqy',
           'sentry-cli login --auth-token sntrys_PxD0qheSvbC9uURCNdEsGsLj5JQSaF60APEVHYyDU3QxdcQaI9wxxvMgfSqy'),
    Secret('AGE_KEY', 'AGE-SECRET-KEY-17RRXLFL7L046SD6A4HYMQ65VTCNWU3D4XZ3QUN2UFSUK4A7VGEQ0PZZ5JZ',
           '# created: 2026-11-30\n# public key: age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p\nAGE-SECRET-KEY-17RRXLFL7L046SD6A4HYMQ65VTCNWU3D4XZ3QUN2UFSUK4A7VGEQ0PZZ5JZ'),
    Secret('GROQ_KEY', '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',
           "groq = Groq(api_key='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')"),
    Secret('XAI_KEY', 'xai-NcBYOP0VXPvg0e6Um8fOKTUKq5gsdRbKgWn25A3QIPeEDC6G9cBeMu3HrbAWhwLAYmi05xWpSwS4j52I',
           'grok via xai-NcBYOP0VXPvg0e6Um8fOKTUKq5gsdRbKgWn25A3QIPeEDC6G9cBeMu3HrbAWhwLAYmi05xWpSwS4j52I'),
    Secret('PERPLEXITY_KEY', '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',
           'perplexity 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'),
    Secret('REPLICATE_TOKEN', 'r8_QF3fJT5YUbRdCld7nShcw0cZ23lDe0JZzBsWX',
           'replicate run with r8_QF3fJT5YUbRdCld7nShcw0cZ23lDe0JZzBsWX'),
    Secret('HF_TOKEN', 'api_org_gW2Zll1P1eyW3H5W6i665qLuQjaTyyLAw4',
           'hf org token api_org_gW2Zll1P1eyW3H5W6i665qLuQjaTyyLAw4'),
    Secret('ALIBABA_KEY', 'LTAI4dpCh66a0ixbIT7dAZfI',
           'aliyun configure --access-key-id LTAI4dpCh66a0ixbIT7dAZfI'),
    Secret('TENCENT_KEY', 'AKIDHwRkoGz9I4p8d948Ph8Omq8q3xK8zinT',
           'tencent cloud secret id AKIDHwRkoGz9I4p8d948Ph8Omq8q3xK8zinT'),
    Secret('GOOGLE_OAUTH', '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',
           'client secret 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 from the console'),
    Secret('GOOGLE_OAUTH', '1//0XDZcf-7lz0CDrEZ_b-KFXt6W1xF9ZxP4elqO6QZf7WVVlQ_j-sOEQPfbx7J8',
           'refresh with 1//0XDZcf-7lz0CDrEZ_b-KFXt6W1xF9ZxP4elqO6QZf7WVVlQ_j-sOEQPfbx7J8'),
    Secret('GOOGLE_OAUTH', 'ya29.a0rkHhonwesQgYybVYHuCAUeQftHupwdX8XzBkFOTxt8Nyiq-ne7hJkBb1AmsK',
           'gcloud printed ya29.a0rkHhonwesQgYybVYHuCAUeQftHupwdX8XzBkFOTxt8Nyiq-ne7hJkBb1AmsK'),
    Secret('NEWRELIC_KEY', 'NRAK-R1X8MOKQBQ96XBLGXOMCE7ARKDF',
           'new relic user key NRAK-R1X8MOKQBQ96XBLGXOMCE7ARKDF'),
    Secret('PLANETSCALE_TOKEN', 'pscale_tkn_W5g7e5GavzvUZx_m70DYFSrobSdDekbH_1nZQzunrxC',
           'pscale service token pscale_tkn_W5g7e5GavzvUZx_m70DYFSrobSdDekbH_1nZQzunrxC'),
    Secret('SUPABASE_TOKEN', 'sbp_62ba465e6d3e6c319bdb8a3fdb365d6f7f9428e4',
           'supabase login sbp_62ba465e6d3e6c319bdb8a3fdb365d6f7f9428e4'),
    Secret('SHIPPO_TOKEN', 'shippo_live_a6c1fa822b1a9209f9b51201630e381d54b1c6e9',
           'shippo shippo_live_a6c1fa822b1a9209f9b51201630e381d54b1c6e9'),
    Secret('MAILGUN_KEY', 'key-e03b32dd5c55ff79266504b13867d900',
           'mailgun api key-e03b32dd5c55ff79266504b13867d900'),
    Secret('MAILCHIMP_KEY', '6d5076808c4ce307f829db88315337ba-us14',
           'mailchimp 6d5076808c4ce307f829db88315337ba-us14'),
    Secret('AZURE_SECRET', '9Pt8Q~Vi.Aotl7xEV9Eny8Z_ApWHXqHClS0H8i2r',
           'app registration secret 9Pt8Q~Vi.Aotl7xEV9Eny8Z_ApWHXqHClS0H8i2r expires 2027'),
    Secret('JFROG_TOKEN', 'AKCp9aKoKe9qOWgkrbyxBR3wOP5qrC0TMZuvFvs9uBtk8qKYvjpvN0jhS5ekhwMXWEb4MeKIj',
           'artifactory AKCp9aKoKe9qOWgkrbyxBR3wOP5qrC0TMZuvFvs9uBtk8qKYvjpvN0jhS5ekhwMXWEb4MeKIj'),
    Secret('HEROKU_KEY', 'HRKU-p9pVlQ_pjtoJzggRCap18kvu9KVzoGkkgxf8RucEJ-FvBXxMOrpLxaJ52Lig',
           'heroku HRKU-p9pVlQ_pjtoJzggRCap18kvu9KVzoGkkgxf8RucEJ-FvBXxMOrpLxaJ52Lig'),
    Secret('META_TOKEN', 'EAABTIH0Xy56mzbdOeGBEXJFGCcm2FuMt8LMJumFN6sSJ0RnJvxPqqC3nc41ekXvo3ruFuTdCv5OtfDdJPo9ijsMHBNEixv0w0h5qENAiRcBqoW4PyoHv3QRID9F',
           'graph api page token EAABTIH0Xy56mzbdOeGBEXJFGCcm2FuMt8LMJumFN6sSJ0RnJvxPqqC3nc41ekXvo3ruFuTdCv5OtfDdJPo9ijsMHBNEixv0w0h5qENAiRcBqoW4PyoHv3QRID9F'),
    Secret('PRIVATE_KEY', 'LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFb3dJQkFBS0NBUUVBcHNGUGN5NWlCQjVWVkJod1E3eUtQcGFOQXpQUzNXcERCZEhndE5IMTdFZU1kWUFNR3pwc3BSV3gwZldTCi0tLS0tRU5EIFJTQSBQUklWQVRFIEtFWS0tLS0tCg==',
           'users:\n- name: admin\n  user:\n    client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFb3dJQkFBS0NBUUVBcHNGUGN5NWlCQjVWVkJod1E3eUtQcGFOQXpQUzNXcERCZEhndE5IMTdFZU1kWUFNR3pwc3BSV3gwZldTCi0tLS0tRU5EIFJTQSBQUklWQVRFIEtFWS0tLS0tCg=='),
    Secret('SECRET', 'KPaIiItJhDQFQpczeo5yXrN5UHXXOUVi',
           '{"key": "KPaIiItJhDQFQpczeo5yXrN5UHXXOUVi", "region": "eu-west-1"}'),
    Secret('SECRET', 'jup_24fd9fcea3d3ecb076a44ea1fe55f5b05a77e75b4d6227a4012893edb97cfa33',
           'jup config set --api-key jup_24fd9fcea3d3ecb076a44ea1fe55f5b05a77e75b4d6227a4012893edb97cfa33'),
    Secret('WEBHOOK', 'https://contoso.webhook.office.com/webhookb2/1041f1c0a236ccf9e2baab1fa1519886866c@29041484bd1c7f50285d241456507339ca90/IncomingWebhook/6692869e33c710234d399c6a633e4cc3/dbd0e9f73827892d28d86cde023476a1d734',
           'teams alert to https://contoso.webhook.office.com/webhookb2/1041f1c0a236ccf9e2baab1fa1519886866c@29041484bd1c7f50285d241456507339ca90/IncomingWebhook/6692869e33c710234d399c6a633e4cc3/dbd0e9f73827892d28d86cde023476a1d734'),
    Secret('PASSWORD', 'S3cretMysql',
           'mysql -h db -u root -pS3cretMysql shop < dump.sql'),
    Secret('PASSWORD', 'sshpw-991',
           'sshpass -p sshpw-991 ssh deploy@10.0.0.7'),
    Secret('PASSWORD', 'curlPw-42',
           'curl -u admin:curlPw-42 https://ci.acme.io/api/json'),
    Secret('PRIVATE_KEY', 'AAABAQDk3mX9vQ2uL8sJ1bP7aW4zY6cN0eR5tG3hK9jM2qV8xF1',
           'PuTTY-User-Key-File-3: ssh-rsa\nEncryption: none\nPrivate-Lines: 1\nAAABAQDk3mX9vQ2uL8sJ1bP7aW4zY6cN0eR5tG3hK9jM2qV8xF1\nPrivate-MAC: 0a1b'),
    Secret('AUTH_HEADER', 'glpat-needle-Zx81kLm',
           "curl --header 'PRIVATE-TOKEN: glpat-needle-Zx81kLm' https://gitlab.com/api/v4/projects"),
    Secret('SECRET', 'vX9kq2LmZ8nB4rT6',
           'openssl enc -aes-256-cbc --passphrase-file key.txt; --client-secret vX9kq2LmZ8nB4rT6'),
)

#: Every format: what the seeding and cassette tests check.
ALL_SECRETS: tuple[Secret, ...] = SECRETS + MORE_SECRETS

#: Developer text the newer rules must leave alone (each once fired in a real transcript or a probe).
MORE_BENIGN: tuple[str, ...] = (
    "echo '{\"ts\":\"'$(date -u +%Y-%m-%dT%H:%M:%SZ)'\"}' >> events.jsonl",
    "docker run --rm -u 1000:1000 node:20 npm test",
    "Invalid --api-key format: dummy-key",
    "4. 生成幂等性密钥 = SHA256(contextId:priceId:currencyId)",
    "SSH 私钥: E:\\keys\\prod.pem",
    "修改密码：请在设置里完成",
    "忘记密码了怎么办？",
    "数据库账号和密码（你创建RDS时设的）这个要怎么看",
    "用密钥对登录 ECS2 实例，私钥 id_ed25519.pem 放好",
    "密码 admin 不安全",
    "sorted(items, key=lambda x: x.name)",
    "cache key: src/pipeline/cli2.py",
    "credential: token",
    "mysql -u root -p shop",
    "curl -u admin https://ci.acme.io",
    "the SK and PK columns of the table",
    "ssh-keygen -t ed25519 -C ada@acme.io",
)
