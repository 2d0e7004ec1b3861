"""Small text helpers the extractive summary's parts share: clipping, list and Markdown marks, word units."""

from __future__ import annotations

import re

from pipeline.facts.turns import UNITS


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


#: A list marker ("1. ", "C. ", "2) ", "3、"), where the next item starts, and Markdown bold and heading
#: marks: none of them are words of a title, an outcome or a decision.
_LIST_MARK = re.compile(r"^(?:\d{1,3}|[A-Za-z])(?:[.)]\s+|、)")
_NEXT_ITEM = re.compile(r"\n|\s(?:\d{1,3}|[A-Za-z])[.)]\s")
_MARKUP = re.compile(r"\*\*|(?<!\S)#{1,6}(?=\s)")
_UNITS = UNITS  # a CJK character or a word in any other script (the facts layer's own measure)
_CODE_SPAN = re.compile(r"`[^`\n]*`")
#: Bold marks between a sentence's end and the next word ("…the global configuration.**Updating the client**", a
#: reasoning summary's heading run on after the text) or between two bold runs ("snippet****Preparing"): taken out
#: bare, they glued two words into one ("configuration.Updating", read as a file name).
_GLUED_BOLD = re.compile(r"(?<=[.!?;:)])\*{2,}(?=\w)|(?<=[a-z])\*{4,}(?=[A-Z])")


def unmark(text: str) -> str:
    """``text`` without Markdown bold and heading marks, on one line, and no two words glued where a mark was."""
    return " ".join(_MARKUP.sub("", _GLUED_BOLD.sub(" ", text)).split())
