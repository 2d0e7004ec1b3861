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
