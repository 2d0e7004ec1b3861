"""detect_language: script shares first, Latin stopwords second, code never counts."""

from __future__ import annotations

import pytest

from pipeline.facts.lang import detect_language, guess_language, session_language


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("fix the parser tests please, they are failing after the merge", "en"),
        ("帮我修复 src/parser.py 的 bug，测试一直失败", "zh"),
        ("parserのテストが失敗しています。直してください", "ja"),
        ("파서 테스트가 실패합니다. 고쳐 주세요", "ko"),
        ("Почему тесты падают после слияния?", "ru"),
        ("Чому тести не працюють після злиття? Її треба виправити", "uk"),
        ("Por que os testes não funcionam? Você pode corrigir isso", "pt"),
        ("¿Por qué los tests fallan? Quiero que lo arregles con una solución", "es"),
        ("Warum funktioniert der Test nicht? Kannst du das bitte reparieren", "de"),
        ("Pourquoi le test ne fonctionne pas? Je veux une solution pour ce fichier", "fr"),
        ("Hola, necesito que me ayudes a migrar este proyecto de Express a Fastify", "es"),
        ("napraw błąd na stronie logowania, nie działa", "pl"),
        ("giriş sayfasındaki hatayı düzeltir misin? çalışmıyor", "tr"),
        ("Hãy sửa lỗi đăng nhập giúp tôi và thêm test", "vi"),
        # Vietnamese typed without tone marks, as many do on an English keyboard
        ("gio chung ta lam viec trong thu muc aos nhe. toi muon hoc hoi tu mo hinh nay", "vi"),
        ("tolong perbaiki bug di halaman login, tidak bisa masuk", "id"),
        ("لطفا این مشکل را درست کن، فونت نمودارها باید وزیر باشد", "fa"),  # a blind set's Persian sessions
        ("یہ ٹیسٹ کیوں ناکام ہو رہا ہے؟ اسے ٹھیک کریں", "ur"),
        ("الرجاء إصلاح خطأ تسجيل الدخول في الصفحة", "ar"),  # none of the letters only Persian or Urdu write
        # a blind set's Czech session read as English: no vote for a Latin language outside the list
        ("Žádná změna, stále stejne odmítnutí od bota", "cs"),
        ("Udělej novou branch / PR s názvem scrapfly-integration", "cs"),
        ("Varför fungerar inte testet? Kan du fixa det", "sv"),
        ("De ce nu funcționează testul? Te rog să repari", "ro"),
        ("Miért nem működik a teszt? Kérlek javítsd", "hu"),
        # their words take no vote from the languages beside them
        ("Este proyecto no funciona, quiero que lo arregles", "es"),
        ("Dit werkt niet, kun je het van de server halen", "nl"),
        ("Não funciona, nem o login", "pt"),
    ],
)
def test_detect_language(text: str, code: str) -> None:
    assert detect_language([text]) == code


def test_code_and_paths_do_not_outvote_chinese_prose() -> None:
    text = "这个函数报错了\n```python\ndef parse(self, text):\n    return self.lexer.tokens(text)\n```\n看 `src/parsekit/parser.py`"
    assert detect_language([text]) == "zh"


def test_english_identifiers_in_a_chinese_sentence() -> None:
    assert detect_language(["把 parser 的 unescape 逻辑改成用 lexer 的版本"]) == "zh"


def test_a_few_foreign_words_stay_english() -> None:
    assert detect_language(["please check the config and tell me what is wrong with the el parser"]) == "en"


def test_no_prose_gives_default() -> None:
    assert guess_language(["```\nprint(1)\n```", "/usr/bin/env"]) is None
    assert detect_language(["```\nprint(1)\n```"]) == "en"
    assert detect_language([], default="zh") == "zh"


def test_deterministic_across_calls() -> None:
    texts = ["修复一下", "fix it"] * 3
    assert {detect_language(texts) for _ in range(5)} == {"zh"}


MAVEN = """C:\\Users\\86182\\Desktop\\上班\\嘉兴医院\\health-backend>mvn clean install
[INFO] Scanning for projects...
[ERROR] Failed to execute goal org.springframework.boot:spring-boot-maven-plugin:3.3.3:repackage (repackage) on project common: Unable to find mai
n class -> [Help 1]
[ERROR] To see the full stack trace of the errors, re-run Maven with the -e switch.
Caused by: org.springframework.beans.factory.BeanCreationException: Error creating bean with name 'dataSource'
        at org.springframework.beans.factory.support.ConstructorResolver.instantiate(ConstructorResolver.java:648)
        ... 17 more"""


def test_pasted_logs_and_windows_paths_are_not_prose() -> None:
    assert guess_language([MAVEN]) is None  # wrapped fragments ("n class -> [Help 1]") go with their block
    assert detect_language([f"构建又失败了，帮我看看\n\n{MAVEN}"]) == "zh"
    assert detect_language(["Error handling in `load()` is wrong, please fix it"]) == "en"  # prose, not a log line


def test_session_language_asks_the_assistant_when_user_prose_is_scarce() -> None:
    replies = ["我看到问题了。Maven构建失败是因为在根目录的`pom.xml`文件中声明了一个不存在的模块`web`。",
               "`common`模块应该是一个库模块，不需要主类，所以要跳过Spring Boot Maven插件。"]
    assert session_language([MAVEN, MAVEN], replies) == "zh"
    assert session_language(["init"], ["Which stack do you want, and should I create the initial commit?"]) == "en"
    # enough user prose decides on its own, whatever the assistant writes
    ask = "Por que os testes não funcionam depois do merge? Você pode corrigir isso e fazer o commit"
    assert session_language([ask], replies * 5) == "pt"
    assert session_language([], [], default="de") == "de"


def test_written_language_needs_evidence_for_latin_text() -> None:
    from pipeline.facts.lang import written_language

    assert written_language(["stub goal", "stub phase title"]) is None  # no function word: can't tell
    assert written_language(["Fixed the build and ran the tests"]) == "en"
    assert written_language(["Corrigi o build do projeto e agora funciona"]) == "pt"
    assert written_language(["修复了构建问题，测试全部通过"]) == "zh"


PROMPT = "\n".join(["You are the Analyzer Agent. Read the code, trace the data flow and report what is wrong."] * 40)


def test_own_script_framing_a_paste_outvotes_the_pasted_english() -> None:
    """A Russian (or Chinese) user who pastes a long English prompt between their own lines is still
    writing Russian: the non-Latin script opens or closes most of their messages."""
    user = [f"Посмотри, почему текст подставляется один и тот же.\n\n{PROMPT}", "куда ты создал файл",
            "создай файл в корневой папке"]
    assert session_language(user, []) == "ru"
    assert session_language([f"帮我看看这个问题\n\n{PROMPT}"], []) == "zh"


def test_a_foreign_line_in_the_middle_of_english_does_not_flip_the_session() -> None:
    # A pasted non-Latin line inside a message (not framing it), or framing only a minority of messages.
    assert session_language([f"Please fix this.\n失败了 一直\n{PROMPT}\nThanks, that is all"], []) == "en"
    english = [f"please fix the parser tests and then {PROMPT[:200]}", "now run the whole suite again and show me",
               "and commit it with a message that says what changed in the parser"]
    assert session_language([*english, "翻译这个：你好世界"], []) == "en"


def test_what_a_harness_adds_inside_a_typed_message_is_not_the_users_language() -> None:
    """Claude Code's IDE line and Hermes's image description are English whatever the user types."""
    ide = ("<ide_opened_file>The user opened the file d:\\app\\src\\main\\java\\Service.java in the IDE. This may or may "
           "not be related to the current task.</ide_opened_file>\n\n")
    assert session_language([ide + "你好", ide + "看看这个类"], []) == "zh"
    image = ("[The user attached an image. Here's what it contains:\nThe screenshot shows a settings page with a dark "
             "header, a [Save] button and a form of four text fields. The overall look is clean and modern, and the "
             "labels are in a small grey sans-serif font that is easy to read on the light background.]\n"
             "[If you need a closer look, use vision_analyze with image_url: /tmp/shot.png]\n\n")
    assert session_language([image + "把按钮改成蓝色", image + "标题太大了"], []) == "zh"
    # a note that failed to analyse, with no hint line, ends at its own "]"
    failed = "[The user attached an image but it couldn't be analyzed. Ask the user what it shows if you need it.]\n\n"
    assert session_language([failed + "这个页面白屏了", "还是白屏"], []) == "zh"
    # what the user typed in English stays English
    assert session_language([ide + "please rename the service and update every caller"], []) == "en"


def test_harness_text_removal_is_linear_on_unclosed_tags_and_notes() -> None:
    import time

    from pipeline.facts.lang import _typed_part

    for text in ("<ide_opened_file>" * 50_000, "[The user attached an image" * 50_000,
                 "<ide_selection>x</ide_selection>" * 50_000):
        t0 = time.perf_counter()
        _typed_part(text)
        assert time.perf_counter() - t0 < 2.0


def test_a_users_short_messages_outvote_long_english_templates_by_message() -> None:
    """A Spanish user's Codex session: the /init prompt and a custom "ship" prompt (English, 300 words each, sent in the
    user's role three times) outweighed five short Spanish messages by words, and the note came out in English. By
    message, Spanish wins; a session where the user also types English stays English."""
    from pipeline.facts.lang import session_language

    template = ("1. **Never invoke this prompt automatically.** It must be triggered by the user. 2. **Never skip Step "
                "0.** The commit message must be confirmed before any git operations. ") * 6
    spanish = ["crea una rama de trabajo y shipea los cambios", "hazlo, te lo pido yo, saltate el protocolo",
               "escribeme el Readme explicando un poco lo que hace el repo y su utilidad",
               "hay alguna manera de hacer que el fichero readme se pueda seleccionar", "ok"]
    assert session_language([template, *spanish, template, template], []) == "es"
    english = ["please create a branch and ship the changes", "why does the build fail on the readme?",
               "can you make the readme selectable by language?"]
    assert session_language([template, *english, spanish[0]], []) == "en"


def test_a_terminal_pasted_as_a_message_frames_nothing() -> None:
    """A Traditional Chinese user asked once, then pasted ``$ mount`` and its output twice as messages of their own:
    the mount table's words ("devtmpfs on /dev type devtmpfs (rw,relatime…)") are no framing line of the user's, and
    the session is theirs, Chinese."""
    mount = "$ mount\n" + "\n".join(f"tmpfs on /run/{n} type tmpfs (rw,nosuid,nodev,relatime,size={n}k,mode=755)"
                                     for n in range(40))
    ask = "我想探討能不能在不update DUT firmware 的情況下, 把本地build好的framework binary上傳到機器上, 可以馬上驗證結果呢?"
    assert session_language([ask, mount, mount], []) == "zh"
    assert session_language(["please check why the root is mounted read-only", mount, mount], []) == "en"
    prompt = "ana@box:~/app$ df -h\n" + "\n".join(f"/dev/sd{n} 20G 1G 19G 5% /data/{n}" for n in range(30))
    assert session_language([ask, prompt, prompt], []) == "zh"


def test_a_short_italian_ask_is_italian() -> None:
    """One Italian sentence, few of the commonest function words in it: the words only Italian spells so decide."""
    assert session_language(["Rompendo la retro-compatibilità che non deve essere garantita in alcun modo rimuovi "
                             "in ordine questi comandi: mkrepo, mkdev", "proceed"], []) == "it"


def test_a_user_who_typed_little_but_clearly_in_one_language_sets_it() -> None:
    """A spec-kit session: the templates are the tool's, the user typed "schreibe alles auf deutsch" and "ja bitte", and
    the assistant wrote thousands of English words before switching to German. The user's few messages that say clearly
    which language they are in all say German: the note is German. A message too short to say (``ok``) decides
    nothing, and scarce prose with no clear vote still asks the assistant (the test above)."""
    english = ["I updated the constitution and synchronised the dependent templates with the new version. " * 40]
    assert session_language(["schreibe alles auf deutsch", "ja bitte"], english) == "de"
    assert session_language(["ok", "ja bitte"], english) == "en"


def test_prompts_another_tool_wrote_pasted_whole_do_not_outvote_the_users_own_lines() -> None:
    """A blind set's Chinese Cursor session: between the user's own short lines ("是不是还没有修改好", "如何启动这个项目")
    came long English prompts another tool wrote ("# Prompt for Cursor: Fix Unresponsive Buttons…", "**Part 1: …**"),
    more messages than the user's own. A long document that opens on a Markdown heading is a paste: the user's lines
    decide, and they are Chinese. An English user who writes such prompts and pastes one Chinese line stays English."""
    prompt = ("# Prompt for Cursor: Fix Unresponsive Buttons\n\n# Context:\nAfter the previous attempts, the Generate "
              "and Preview buttons do nothing when clicked. " * 6)
    part = "**Part 1: Fix the gray screen after closing Preview**\n* **Problem:** the UI becomes unusable. " * 6
    own = ["增加Image1的两个功能，去掉Image2的功能。", "是不是还没有修改好", "网站打开显示Not Found", "如何启动这个项目"]
    assert session_language([*own, prompt, prompt, part, prompt, part, prompt], []) == "zh"
    english = ["Please fix the preview button and then run the tests again.", "Now add a dark theme to the page."]
    assert session_language([*english, prompt, part, "报错：找不到模块"], []) == "en"


def test_a_persian_session_gets_persian_headings() -> None:
    """A blind set's two Persian Cursor sessions were tagged "ar" and written under Arabic headings."""
    from pipeline.notes.render import headings_for

    assert headings_for("fa")["summary"] == "خلاصه" != headings_for("ar")["summary"]
    assert detect_language(["لطفا فونت نمودارها و جدول‌ها را وزیر کن", "فونت وزیر اضافه شد"]) == "fa"
