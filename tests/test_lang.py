"""detect_language: script shares first, Latin stopwords second, code never counts."""

from __future__ import annotations

import pytest

from pipeline.lang import detect_language, guess_language


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
