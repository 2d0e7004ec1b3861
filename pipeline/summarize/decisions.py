"""Key decisions, extracted: the sentences in which a session chose something, quoted, never paraphrased.

``decision_candidates`` finds every sentence with choice language (English, Chinese and the other languages
sessions are held in), with the options it turned down and its stated reason; the LLM summariser gets these
as hints and judges them itself. The extractive note, which cannot judge, keeps only the firm ones
(``firm``: no offer, question, guess, table row or lead-in) and at most ``MAX_DECISIONS`` of them, spread over
the session (``strongest``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from pipeline.facts.turns import _kind, _live, _prose, _sentences, user_words
from pipeline.models import Decision, Message
from pipeline.screen import Screen
from pipeline.summarize.text import _CODE_SPAN, _LIST_MARK, _MARKUP, _UNITS, _clip, unmark

_DECISION = re.compile(
    # (the words end where a word ends: "Switch Toggle" is no "switch to", "went without" no "went with")
    r"\b(?:decided to|decide to|we'?ll use|we will use|let'?s (?:use|go with|stick with|switch)|going with|"
    r"went with|chose|choose|chosen|picked|opted for|opting for|instead|rather than|switch(?:ed|ing)? to|swap(?:ped|ping)? to|"
    r"prefer(?:red|s)?)\b|\b(?:don'?t|do not)\b[^.;]*,\s*use\b"
    r"|决定|改用|选择|采用|采纳|而不是|不用|(?<!替)换成|还是用|不要|用[^，。；：,;:\n]{1,30}?(?:替代|代替|取代)"
    r"|(?:优先|强制)(?:使用|用|加载|读取|采用)", re.I)
#: What may stand before a label: Markdown marks, a bullet, an emoji ("🔧 **Solution:"). Spelled out, not ``\W``, so the
#: RE2 screen can take the pattern.
_LEAD = "(?:[ \t*#>_~•-]|[\u2600-\u27bf\U0001F300-\U0001FAFF]){0,6}"  # (literal characters: RE2 has no \\u)
_SOLUTION = (r"(?:the |my |proposed |recommended )?(?:solution|fix|workaround|resolution|解决方案|解决办法|修复方案|修复|修正"
             r"|正确(?:的)?(?:做法|方式|方法)"
             r"|soluci[óo]n|solução|correcci[óo]n|correção|çözüm|düzeltme|решение|исправление)(?:\s*#?\d{1,2})?")
_ANSWER_HEADING = (r"#{1,6}[ \t]+" + _LEAD + r"(?:answer|conclusion|bottom line|tl;?dr|结论|結論|答案)[ \t]*[:：][ \t]*"
                   r"[^ \t\n]")
#: A recommendation is the decision of a review or an analysis ("I would not use three optional fields",
#: "Best shape: `embedding_inputs`", "我建议改用…"); a verdict ("Verdict: your MVP proves…") judges, it chooses nothing. Only the extractive note adds these: the LLM's hints
#: (``decision_candidates`` without ``recommendations``) are part of its recorded prompts.
_RECOMMEND = re.compile(
    r"\bI(?:'d| would)(?: not| rather)? (?:use|avoid|keep|go with|recommend|pick|choose|prefer|model|make|split|move)\b"
    r"|\bI (?:recommend|suggest)\b|\b(?:my |our |final )?(?:recommendation|decision)(?: is)?\s*[:：]|\brecommended (?:approach|fix|option|shape|path)\b"
    r"|\b(?:best|safest|simplest) (?:option|approach|shape|fix|choice|path)\s*(?:is\b|[:：])"
    r"|\bor (?:even )?better(?: yet| still)?\s*,"
    r"|我的?(?:建议|建議|推荐|推薦|倾向|傾向)|建议(?:用|使用|采用|改|把|将)|最好(?:用|使用|改用)"
    r"|(?:最终|最后)的?(?:推荐|决定|方案|选择)"
    # a labelled fix is the one the session settled on ("**Fix:** created an IRSA role", "解决方案：改用…")
    rf"|^{_LEAD}{_SOLUTION}[ \t]*[:：][ \t\n]*[^ \t\n]"
    # and so is the answer an analysis gives itself in a heading ("## Answer: Yes — positive, but U-shaped")
    rf"|^{_ANSWER_HEADING}", re.I | re.M)
_ANSWERS = re.compile(_ANSWER_HEADING, re.I)
#: A substitution the session reports or announces is a choice of the new thing over the old ("**Chat** — Replaced
#: the `<Chat>` component with a custom panel on `useChat`", "I'll fix it by replacing X with Y"): at the start of
#: a sentence or after its label (past tense: "Replace X with Y" there tells the user what to do), the first person
#: or "by"; a replacement only described ("the bundler replaces imports with stubs") chooses nothing. Extractive only, as ``_RECOMMEND``: the LLM's hints are recorded prompts.
_SUBSTITUTION = re.compile(
    r"(?:(?:^|[—–:][ \t]+)(?:\*\*)?[Rr]eplaced|\b(?:I|[Ww]e)(?:'ve| have)?[ \t]+replaced|\b(?:I|[Ww]e)(?:'ll| will)[ \t]+replace"
    r"|\bby[ \t]+replacing)[ \t]+(?P<old>[^.;!?\n]{2,120}?)[ \t]with[ \t]+[^ \t\n]", re.M)
# A region of code or text rewritten ("replaced the body with `unescape(…)`") is an edit, not a choice. Checked on
# the match, not in the pattern: a lookahead there would leave the RE2 screen unable to take it (a "maybe" for all).
_REWRITTEN = re.compile(r"(?:the|its|this|that|their)[ \t]+(?:whole[ \t]+|entire[ \t]+)?(?:body|content|contents|code"
                        r"|line|lines|text|implementation|file)\b")


def _substitutes(text: str) -> bool:
    return any(not _REWRITTEN.match(m.group("old")) for m in _SUBSTITUTION.finditer(text))
#: Choice words in the other languages sessions are held in (Portuguese, Spanish, French, German, Turkish,
#: Russian): the note quotes the session, so its decisions are found in the session's own words. Turkish puts the
#: option turned down before its word ("`QTimer` yerine …": instead of QTimer).
_DECISION_OTHER = re.compile(
    r"\b(?:decid(?:i|imos|iu|í|ió|ido)|opt(?:ei|amos|ou|é)|escolh(?:i|emos|eu)|eleg(?:í|imos)|em vez de|ao inv[ée]s de"
    r"|en (?:lugar|vez) de|vamos usar|vou usar|mudei para|troquei|recomendo|recomiendo|j'ai choisi|au lieu de"
    r"|je recommande|stattdessen|entschieden|empfehle"
    r"|yerine|karar (?:verdim|verdik|verildi)|tercih (?:ettim|ettik|edildi|ediyorum|ederim)|seçtim|seçtik"
    r"|öneriyorum|öneririm|kullanalım|kullanacağız)\b"
    r"|(?<![А-Яа-яЁё])(?:решил[аи]?|решено|выбрал[аи]?|вместо|рекомендую|рекомендуется|предлагаю|лучше использовать)"
    r"(?![А-Яа-яЁё])"
    # Italian, Vietnamese (with and without tone marks), Arabic
    r"|\b(?:invece di|ho deciso|abbiamo deciso|ho scelto|abbiamo scelto|consiglio di|thay vì|quyết định|đã chọn"
    r"|nên dùng|thay vi|quyet dinh)\b|بدلاً من|بدلا من|قررت|قررنا|اخترت"
    # Korean and Japanese (no word boundaries: their particles attach to the word)
    r"|대신|결정했|결정하였|선택했|채택했|하기로 (?:했|하였|결정)|는 게 (?:낫|좋)겠|권장합니다|추천합니다"
    r"|(?:으)?로 (?:바꿨|바꾸었|변경했|전환했|교체했|통합했)"
    r"|ことにしました|ことにします|代わりに|を採用|採用しました|を選択しました|を選びました|推奨します|おすすめします"
    r"|の方が(?:良い|よい|いい)|に(?:切り替え|変更)(?:ました|します)", re.I)
#: A change made for a stated reason is a choice too ("移除Spring Boot Maven插件，因为common是一个库模块", "moving the
#: import inside main() to avoid the circular import"): a change verb and a reason in one sentence, not a guess or
#: a failure's post-mortem ("likely because", "failed because I used a host path"). "since" is left out: it
#: explains far more often than it decides ("the replace() call is a no-op since the lexer changed").
#: The label a report puts before a change's reason ("**Removed:** x" / "**Reason:** y"; Portuguese, Spanish, Chinese).
_REASON_WORDS = r"reason|motivo|raz[óo]n"
_REASON_CJK = r"原因|理由"
_REASON = re.compile(r"\b(?:because|so that|to avoid|to prevent|çünkü|bu yüzden|bu nedenle)\b|因为|由于|以便|为了|避免|以免"
                     rf"|\b(?:{_REASON_WORDS})\b[ \t]*[:：]|(?:{_REASON_CJK})[:：]", re.I)
_REASON_CHANGE = re.compile(
    r"\b(?:using|used|switch(?:ed|ing)|mov(?:ed|ing)|remov(?:ed|ing)|replac(?:ed|ing)|skipp(?:ed|ing)|dropp(?:ed|ing)"
    r"|disabl(?:ed|ing)|renam(?:ed|ing)|splitting|pinn(?:ed|ing)|revert(?:ed|ing)|exclud(?:ed|ing)|downgrad(?:ed|ing)"
    r"|wrapp(?:ed|ing))\b|^(?:use|switch|move|remove|replace|skip|drop|disable|rename|split|pin|revert|exclude|wrap)\b"
    r"|\b(?:I'll|I will|we'll|we will|let's|let me)\s+(?:use|switch|move|remove|replace|skip|drop|disable|rename|split"
    r"|pin|revert|exclude|wrap)\b|移除|删除|改为|改用|改成|跳过|去掉|替换|禁用|拆分|降级|不应|不需要|换成"
    r"|\b(?:kullan|değiştir|kaldır|taşı|dönüştür|kurma|kurul)\w*"
    # Portuguese and Spanish reports: "**Removido:** `mkdir -p …`", "Reemplazado por …"
    r"|\b(?:removid|substitu[íi]d|movid|desativad|renomead|eliminad|reemplazad|desactivad|renombrad)[oa]s?\b", re.I)
_GUESS = re.compile(r"\b(?:likely|probably|perhaps|maybe|seems?|fail\w*|error\w*|muhtemelen|belki|galiba|sanırım)\b"
                    r"|可能|似乎|失败|报错", re.I)


#: A fix reported tersely, the problem before a dash and the change after it ("Circular import — moving the commands
#: import inside main()"): the dash says "so".
#: A reason joined to what was done by "so" or "since" ("The notebook was empty, so I ran the analysis as scripts",
#: "Since this is Vite, I'll write the hooks for that stack", "Relaxed config validation so any model ID is
#: accepted"): a first-person act, or a reported change, with its cause.
_SO_REASON = re.compile(r",\s*so (?:I|we)(?:'ll|'m|'ve| will| am| have)?\s+(?:going to\s+)?(?P<act>\w+)"
                        r"|\bsince\b[^,;\n]{3,120},\s*(?:I|we)(?:'ll|'m|'ve| will| am| have)?\s+(?:going to\s+)?(?P<act2>\w+)"
                        r"|\b(?:relaxed|added|removed|changed|replaced|made|moved|switched|updated|renamed|split|dropped"
                        r"|disabled|enabled|restricted|limited|tightened|loosened)\b[^.;\n]{3,120}\bso (?:that )?\w", re.I)
#: ...where "so I" is followed by an act, not by the agent going on ("so I'll proceed with the evaluation") or musing.
_NOT_AN_ACT = re.compile(r"(?:proceed|continu|start|begin|go|now|check|run|look|read|verif|test|try|tri|think|guess|assum"
                         r"|suspect|can|could|should|might|know|knew|notic|figur|wonder)\w*", re.I)


def _so_reasoned(text: str) -> bool:
    return any(not _NOT_AN_ACT.fullmatch(m.group("act") or m.group("act2") or "") for m in _SO_REASON.finditer(text))


_TERSE_FIX = re.compile(r"^[^—–\n]{3,60}\s[—–]\s+(?:moving|removing|replacing|switching|using|dropping|renaming|pinning"
                        r"|reverting|splitting|wrapping|skipping|disabling|excluding|downgrading)\b", re.I | re.M)


def _reasoned(sentence: str) -> bool:
    return bool(((_REASON.search(sentence) and _REASON_CHANGE.search(sentence)) or _TERSE_FIX.search(sentence)
                 or _so_reasoned(sentence)) and not _GUESS.search(sentence))


_CORRECTION = re.compile(r"^(?:no,\s|actually,?\s)", re.I)
#: An option's text: up to a sentence's punctuation, but a code span ("`router.push`") and a dot inside a name or a
#: version ("v9.6.0", "app.config") are part of it (cut there, "rejected: the bleeding-edge 9").
_OPT = r"(?:`[^`\n]{1,80}`|\.(?=\w)|[^,.;:!?()`])"
_REJECTED = (
    re.compile(rf"\binstead of\s+(?:using\s+)?({_OPT}+)", re.I),
    re.compile(rf"\brather than\s+(?:using\s+)?({_OPT}+)", re.I),
    re.compile(rf"\b(?:chose|choose|chosen|picked|prefer\w*|going with|went with)\b[^.;]*?\bover\s+({_OPT}+)",
               re.I),
    re.compile(rf"\b(?:don'?t|do not|would not|wouldn'?t) use\s+({_OPT}+)", re.I),
    re.compile(rf"\bswitch(?:ed|ing)? from\s+({_OPT}+?)\s+to\b", re.I),
    re.compile(rf"\b(?:em vez de|ao inv[ée]s de|en (?:lugar|vez) de|au lieu de)\s+({_OPT}+)", re.I),
    re.compile(rf"(?<![А-Яа-яЁё])вместо\s+({_OPT}+)", re.I),
    # Turkish: up to three words before "yerine" (each bounded, so a long run without spaces costs no rescans)
    re.compile(r"(?<![^\s,;:(])((?:[^\s,;:!?()*–—]{1,40}\s+){0,2}[^\s,;:!?()*–—]{1,40})\s+yerine\b", re.I),
    re.compile(r"而不是(?:用|使用)?([^，。；：,.;:！？()（）]+)"),
    re.compile(r"(?:不用|不要)(?:再)?(?:用|使用)?([^，。；：,.;:！？()（）]+)"),
    re.compile(r"把([^，。；：,.;:！？()（）]+?)(?:替换成|替换为|换成|改成)"),
    re.compile(r"用[^，。；：,;:\n]{1,30}?(?:替代|代替|取代)([^，。；：,.;:！？()（）的]+)"),
)
#: An option that only points back ("instead of this", "bunun yerine") names nothing a reader could look up.
_POINTER = re.compile(r"this|that|it|these|those|them|bunun|onun|şunun|bunların|onların|这个|那个|这样|那样", re.I)
_LAST_CODE = re.compile(r"`[^`\n]+`$")
_OPTION_END = re.compile(r"\s+(?:because|since|so|for|as|which|when|if)\b|因为|由于", re.I)
_RATIONALE = re.compile(r"\b(?:because|since|so that|as it|çünkü)\b\s*(.+)$|(?:因为|由于)(.+)$"
                        rf"|\b(?:{_REASON_WORDS})\b[ \t]*[:：]\**\s*(.+)$|(?:{_REASON_CJK})[:：]\**\s*(.+)$", re.I)


#: Choice words in a sentence that does not make a choice: an offer or a question to the user, a guess,
#: a table row, or a lead-in to a list ("Karpenter can choose between these based on:"), unless the lead-in itself
#: says what was adopted ("改用 tooltip："). The LLM gets all candidates as hints and judges them; the
#: extractive summary, which cannot, drops these.
_TENTATIVE = re.compile(
    r"^(?:maybe|perhaps|possibly|alternatively|if\b|or\b|please\b|\|)|\b(?:let me know|would you like|you'?d (?:like|prefer)"
    r"|tell me if|if you(?:'re| are) not sure|might|may need to|could try|(?:I|we) could (?!not\b)|i wonder)\b|^(?:\d{1,2}[.、]\s*)?(?:也许|可能|或者|请|如果|如需|如要|若|假如|要是|(?:你的)?意思是)|[，,]\s*请"
    # the same offers and conditions in es/pt/fr/de: "Si quieres que vuelva a `/` en lugar de `/login`, dime."
    r"|^(?:si|wenn|falls)\b|^se (?:quiser|preferir|desejar|você)\b|\b(?:dime|avísame|me avisas|me dices|me diz|me avise"
    r"|dites-moi|sag mir)\b", re.I)
_LEAD_IN = re.compile(r"[:：]\W*$")
_ADOPTED = re.compile(r"\b(?:decided|went with|switch(?:ed)? to|instead|rather than)\b|决定|改用|采用|(?<!替)换成|而不是", re.I)


# Choice words that choose nothing: a UI's "选择框"/"可选择" (a select box, selectable), "什么都不用管" (no need
# to), "your chosen model", "Bettor's chosen side", "can choose from", "if you prefer" and "你可以根据…选择" (addressed
# to the user), "has picked up the new code" and "switch gears" (idioms). In Chinese also:
# "要不要/是不是" (whether), "帮你决定/决定下一个…" (asking for a decision), "不用改/不要动了/不用额外花钱" (no need
# to do a bare verb: an instruction, no option turned down), "不要有卡顿/不要误导我" and "如果不用…" (a
# requirement, a complaint, a condition).
_NOT_A_CHOICE = re.compile(
    r"选择(?:[框器项性题栏]|过渡|效果|按钮|面板|列表|功能|组件|弹窗|逻辑|界面)|可(?:以)?选择|(?:都|也|就)不用"
    r"|\b(?:an?|the|your|their|my|our|its|\w+'s|implement\w*) chosen\b|\bpick(?:ed|ing|s)? up\b"
    r"|\bif you (?:prefer|choose|decide)\b|[你您]们?(?:可以|能)[^，。；\n]{0,20}选择|[你您]们?不用"
    r"|要不要|用不用|是不是|需不需要|(?:帮(?:我|你)|你来|由你|需要你)决定|决定(?:下一|一下|哪)"
    r"|(?:不用|不要)(?:再)?(?:[\u3400-\u9fff]|担心|纠结|糾結|操心|理会|拖延|着急|在意|客气|麻烦)(?:了|它)?"
    r"(?=[，。；、,.;！？!?）)*]|$)"
    r"|不用额外|不要有|不[用要](?:我|你)|不要误导|(?:如果|假如|要是)不[用要]|[你您]的选择"
    # an admonition, no option turned down: "不要瞎改", "先不要乱改", "不要搞混乱了", "不要随便删"
    r"|(?:不用|不要)(?:再)?(?:瞎|乱|胡乱|随便|随意|擅自|盲目|搞混|搞乱)"
    # how to click through a console ("不要勾任何东西", "不用一个个截"): a step for the user, no option declined
    r"|(?:不用|不要)(?:再)?(?:一个个|一一)?(?:勾|填|点|截|按|拖|输入)"
    r"|\b(?:can|could|to|may|might|will|must|should|let [\w/]+) choose\b|\bchooses\b|\bchoose (?:from|between)\b"
    r"|\bswitch(?:ed|ing)? gears\b", re.I)
# Not a sentence anyone decided in: a heading (also a bold line), a table row, data (a JSON list of asks pasted
# back), or a template's slot ("Recommendation: [which option and why]").
_NOT_PROSE = re.compile(r"^#|^\*\*[^*]+\*\*[:：]?$|\s\|\s|^[\"',\]\[{}]|\"\s*,\s*\"|[:：]\s*\[[^\]\n]*\]\W*$")
#: A statement of what is wrong, not of what was chosen: a finding's label ("Problem:", "Root cause:", "问题：",
#: "Line 39:" of a lint or review report), a "❌" item, or a UI step for the user ("选择 URI 格式", "点击 "Save"").
_FINDING = re.compile(r"^(?:>\s*)?(?:(?:problem|issue|bug|root cause|cause|error|问题|原因|根因|错误)\s*[:：]"
                      r"|lines? \d[\d, -]*[:：]|[❌✗✘]|(?:\d{1,2}[.、)]\s*)?(?:选择|选中|勾选|点击|点选)\s*[\"“「]?[A-Za-z])",
                      re.I)
#: The words a contrast chooses by, and nothing else ("instead of", "rather than", "而不是", "yerine"…): a sentence
#: that has only these may describe what happens ("the wheel keeps bouncing instead of settling") as well as choose.
_CONTRAST = re.compile(r"\b(?:instead|rather than|en (?:lugar|vez) de|em vez de|ao inv[ée]s de|au lieu de|stattdessen"
                       r"|yerine)\b|而不是|(?<![А-Яа-яЁё])вместо(?![А-Яа-яЁё])", re.I)
#: ...and it describes, not chooses, when it reports a fault, a symptom or a finding.
_DIAGNOSIS = re.compile(r"\b(?:keeps|still|never|seem(?:s|ed)?|appears? to|looks like|problem|issues?|bug"
                        r"|wrong|broken|mistake|missed|which means|degraded|parece|problema|todav[íi]a|sigue|sorun|hata"
                        r"|hâlâ|(?:is|are|was|were) (?:still )?using|est[áa]n? usando|estaba usando)\b|问题|错误|不一致|导致|实际上|两次"
                        r"|仍然|失败|报错", re.I)
#: The agent narrating its own next step of work (checking, running, reading, trying, thinking, starting a server): how
#: it works, not what the session chose ("I’m running the production build now; if this passes…", "First I’m checking
#: whether…").
_PROCESS = re.compile(
    r"^(?:(?:first|now|next|then|so),?\s+)?(?:I'm|I am|I'll|I will|let me|we'll|we will)\s+(?:now\s+|also\s+|just\s+)?"
    r"(?:going to\s+)?(?:check\w*|run\w*|doing (?:a|one|another|the)\b|test\w*|verif\w*|validat\w*|inspect\w*|read\w*"
    r"|look\w*|search\w*|scan\w*|grep\w*|open\w*|review\w*|try\w*|explor\w*|confirm\w*|think\w*|propos\w*"
    r"|investigat\w*|start\w*|restart\w*)\b"
    # ...or announcing which of its own skills or tools it applies ("Using `frontend-design-guidelines` because…")
    r"|^(?:(?:I'll|I will|I'm|I am)\s+)?(?:use|using)\b[^.;]{0,80}?\b(?:skills?|guidelines|guidance|compiler|linter)\b", re.I)
#: A sentence that leans on the one before it ("Instead, it keeps…", "This lets the wheel settle…", "It uses the
#: connected wallet…", "Recommendation: This assignment is taking very long…"): a later reader cannot tell what it
#: is about. (A noun after "this" is lower case: "This Supabase project uses…" names what it is about.)
_LEANING = re.compile(r"^(?:\W{0,4}(?:my |final )?(?:recommendation|decision)\s*[:：]\s*)?(?:instead\s*,"
                      r"|(?:(?:it|they)|(?:this|that|these|those)(?:\s+[a-z][\w-]*)?)\s+(?:\w+s|is|are|was|were|will|would"
                      r"|should|can|could|way|means)\b)", re.I)
#: ...or whose choice is only a pointer ("Let me work with that instead").
_POINTS_INSTEAD = re.compile(r"\b(?:that|this|it|them|these|those) instead\b", re.I)
#: Quoted words are someone's words, not the session's choice ("Please switch to TestNet" on a button, a paper
#: titled 「不要用單一 metric」). Bounded, so an unclosed quote costs no rescan.
_QUOTED = re.compile(r'"[^"\n]{1,200}"|“[^”\n]{1,200}”|「[^」\n]{1,200}」|『[^』\n]{1,200}』')




#: Typographic apostrophes ("I’d keep", "let’s use", "don’t"), as Codex and Copilot write them: the patterns spell
#: "'". One character for one, so a match's span in the straight text is the same in the text as written.
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})


def _straight(text: str) -> str:
    # str.translate copies every text through a dict lookup per character; most texts have no curly apostrophe.
    if "\u2019" in text or "\u2018" in text or "\u02bc" in text:
        return text.translate(_APOSTROPHES)
    return text


def _chooses(text: str) -> bool:
    rest = _NOT_A_CHOICE.sub(" ", text)
    return bool(_DECISION.search(rest) or _RECOMMEND.search(rest) or _DECISION_OTHER.search(rest) or _reasoned(rest)
                or _CORRECTION.match(rest) or _substitutes(rest))


def _firm(choice: str) -> bool:
    choice = _straight(choice)
    prose = _CODE_SPAN.sub("`…`", choice)  # "Best shape: `X | None`" is no table row
    answers = bool(_ANSWERS.match(prose))  # a heading, but the one that gives the analysis's answer
    if _NOT_PROSE.search(prose) and not answers:
        return False
    choice = " ".join(_MARKUP.sub(" ", choice).split())  # "**Recommendation：**This…" reads as words
    prose = _CODE_SPAN.sub("`…`", choice)
    # A question asked mid-sentence chooses only if its answer follows ("要不要納入 X?— 我傾向納入");
    # "Why did you choose EKS over Kubernetes?" asks.
    answer = _QUOTED.sub(" ", re.split(r"[?？]", prose)[-1])
    if _FINDING.search(prose) or not (answers or _chooses(answer)):
        return False
    if len(_UNITS.findall(choice)) < 3:  # a label ("Recommended Shape"), not a sentence
        return False
    if _PROCESS.search(choice) or _LEANING.search(choice) or _POINTS_INSTEAD.search(choice):
        return False
    if _CONTRAST.search(answer) and not _chooses(_CONTRAST.sub(" ", answer)):  # it chooses by a contrast alone
        if _DIAGNOSIS.search(choice):
            return False
        # and something is chosen besides the option turned down ("Instead of this:", "instead of only `x`.")
        rest = choice
        for pattern in _REJECTED:
            rest = pattern.sub(" ", rest)
        if len(_UNITS.findall(_CONTRAST.sub(" ", rest))) < 2:
            return False
    # Hedges count in the choice itself, not in its reason ("use X, because Y might time out").
    return not _TENTATIVE.search(_RATIONALE.sub("", choice)) and (
        not _LEAD_IN.search(choice) or bool(_ADOPTED.search(choice)))


#: The most decisions a note lists; a long session has more candidates, so the firmest are kept.
MAX_DECISIONS = 12
#: ... from each of this many stretches of the session in turn (``_strongest``).
SPREAD = 4
# A choice that names its verb (decided, switched to, went with, 决定, 改用) or is labelled the fix ("Solution: …"):
# firmer than one that only contrasts.
_STRONG = re.compile(
    r"\b(?:decided|decide to|chose|opted|went with|going with|picked|switch(?:ed|ing)? to|we'?ll use|let'?s use"
    r"|recommend\w*)\b|决定|改用|采用|采纳|(?<!替)换成|选用|建议|建議|推荐|^" + _LEAD + _SOLUTION + r"\s*[:：]", re.I)


def _strongest(decisions: list[Decision], limit: int = MAX_DECISIONS) -> list[Decision]:
    """At most ``limit`` decisions, in session order: a named choice verb, a reason and a rejected option each
    make a decision firmer; among equals the earlier stays (the first statement of a choice is its source)."""
    if len(decisions) <= limit:
        return decisions
    score = {id(d): 2 * bool(_STRONG.search(d.choice)) + bool(d.rationale) + bool(d.rejected) for d in decisions}
    # A long session decides all along: each quarter of the candidates (in session order) gives its firmest in
    # turn, so the choices made late (hosting, deployment) are not all cut for the early ones.
    quarters = [sorted(decisions[i * len(decisions) // SPREAD:(i + 1) * len(decisions) // SPREAD],
                       key=lambda d: -score[id(d)]) for i in range(SPREAD)]
    keep: set[int] = set()
    while len(keep) < limit:
        for q in quarters:
            if q and len(keep) < limit:
                keep.add(id(q.pop(0)))
    return [d for d in decisions if id(d) in keep]


def _plain(d: Decision) -> Decision:
    """Without Markdown bold and heading marks; a sentence split inside **bold** leaves half a pair."""
    choice = unmark(d.choice)
    return d if choice == d.choice else d.model_copy(update={"choice": choice})


#: One RE2 pass tells most replies apart from those that may choose (the ``re`` alternations above cost a
#: scan per position, and most replies choose nothing); a maybe still goes through the ``re`` checks below.
_MAY_CHOOSE = Screen([_DECISION])
_MAY_CHOOSE_OR_RECOMMEND = Screen([_DECISION, _RECOMMEND, _DECISION_OTHER, _REASON, _TERSE_FIX, _SO_REASON,
                                   _SUBSTITUTION])


#: A heading (or a bold line) and the first line under it.
_HEADING_THEN_LINE = re.compile(
    r"^(?:#{1,6}[ \t]+(?P<h>[^\n]+)|\*\*(?P<b>[^*\n]+)\*\*[:：]?)[ \t]*\n(?:[ \t]*\n)?(?P<body>[^\s#|>`-][^\n]*)", re.M)
#: A heading that only announces a choice ("## 我的最终推荐（…）", "## Decision", "**Recommended Shape**"): what was
#: chosen is the line under it. A heading that states the choice itself ("用 AST 不用行数") is left alone.
_ANNOUNCING = re.compile(r"(?:\b(?:decision|recommendation|verdict|recommended \w+|chosen \w+|solution|fix|workaround)"
                         r"|推荐|推薦|决定|決定|结论|結論|建议|建議|选择|選擇|解决方案|解决办法|修复方案)\W*$", re.I)
#: A line that is only a fix's label ("正确做法：", "**Solution:**") is read with the line under it...
_LABEL_THEN_LINE = re.compile(rf"^[ \t]*(?P<label>{_LEAD}{_SOLUTION})\**[ \t]*[:：]\**[ \t]*\n(?:[ \t]*\n)?[ \t]*"
                              r"(?P<body>[^\s#|>`-][^\n]*)", re.M | re.I)
#: ...and a heading that states a labelled fix ("## 🔧 **Solution: Create IRSA for the EBS CSI driver**") as a line.
_LABELLED_HEADING = re.compile(rf"^#{{1,6}}[ \t]+(?={_LEAD}{_SOLUTION}\s*[:：][^\S\n]*[^\s*])", re.M | re.I)
_ASIDE = re.compile(r"[（(][^）)\n]*[）)]")


def _headings_joined(text: str) -> str:
    """``text`` with each announcing heading and the line under it as one sentence ("我的最终推荐：技术栈：方案 C …")."""
    def join(m: re.Match[str]) -> str:
        head = (m.group("h") or m.group("b")).strip().rstrip(":：* ")
        if not _ANNOUNCING.search(_ASIDE.sub("", head).replace("*", "")):
            return m.group(0)
        return f"{head}：{_LIST_MARK.sub('', m.group('body').lstrip('*'))}"
    if "\n" not in text:
        return text
    text = _LABEL_THEN_LINE.sub(r"\g<label>：\g<body>", _LABELLED_HEADING.sub("", text))
    # "**Removed:** `mkdir -p …`" then "**Reason:** the folder exists already": one change and its reason
    text = _REASON_LABEL_LINE.sub(" ", text)
    return _HEADING_THEN_LINE.sub(join, text)


_REASON_LABEL_LINE = re.compile(rf"[ \t]*\n(?:[ \t]*\n)?(?=[ \t]*(?:\*\*)?(?:Why|{_REASON_WORDS}|{_REASON_CJK})[ \t]*"
                                r"(?:\*\*)?[:：])", re.I)


_WRAP_END = re.compile(r"[.!?。！？:：;；]\s*$|^\s*(?:[#|>]|```)")
_WRAP_NEXT = re.compile(r"^\s*(?![a-z][.)]\s)[a-zà-öø-ÿçğışü(]")


def _unwrapped(text: str) -> str:
    """``text`` with hard-wrapped lines joined: a line that ends mid-sentence and a next line that goes on in lower
    case ("…with no OZ inheritance to" / "avoid bytecode size limits.") are one sentence, not a fragment ending "to".
    Fenced code, headings, tables and list items are left as they are."""
    if "\n" not in text:
        return text
    out: list[str] = []
    fenced = False
    for line in text.split("\n"):
        joins = (out and not fenced and out[-1].strip() and not _WRAP_END.search(out[-1])
                 and _WRAP_NEXT.match(line) is not None)
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if joins:
            out[-1] = f"{out[-1].rstrip()} {line.strip()}"
        else:
            out.append(line)
    return "\n".join(out)


def decision_candidates(messages: Sequence[Message], *, recommendations: bool = False) -> list[Decision]:
    """Sentences with explicit choice language (English and Chinese), with rejected options and evidence.

    With ``recommendations``, a review's recommendations count as well (``_RECOMMEND``).
    """
    out: dict[str, Decision] = {}
    screen = _MAY_CHOOSE_OR_RECOMMEND if recommendations else _MAY_CHOOSE

    def chooses(text: str) -> bool:  # one sentence of a reply that may choose: screened again, on its own
        return screen.may_match(text) and bool(_DECISION.search(text) or (recommendations and (
            _RECOMMEND.search(text) or _DECISION_OTHER.search(text) or _reasoned(text) or _substitutes(text))))

    def may_choose(text: str) -> bool:  # the whole reply: any sentence of it may be the reasoned one
        if not screen.may_match(text):
            return False
        return bool(_DECISION.search(text) or (recommendations and (
            _RECOMMEND.search(text) or _DECISION_OTHER.search(text) or _REASON.search(text)
            or _TERSE_FIX.search(text) or _SO_REASON.search(text) or _substitutes(text))))

    for m in _live(messages):
        if m.role not in ("user", "assistant") or (m.role == "user" and _kind(m) != "ask"):
            continue
        if m.role == "assistant" and not may_choose(_straight(m.content)):
            continue  # one scan of the reply instead of one per sentence: most replies choose nothing
        for sentence in _sentences(_unwrapped(_prose(user_words(m.content)) if m.role == "user" else _headings_joined(m.content))):
            plain = _straight(sentence)  # matched as straight; quoted as written (the spans are the same)
            correction = m.role == "user" and _CORRECTION.match(plain)
            if sentence.endswith(("?", "？")) or not (correction or chooses(plain)):
                continue
            rejected: list[str] = []
            for pattern in _REJECTED:
                for hit in pattern.finditer(plain):
                    # "instead of X because ..." / "over X for the cache": the option ends at the reason
                    option = _OPTION_END.split(sentence[hit.start(1):hit.end(1)], maxsplit=1)[0].replace("**", "")
                    if span := _LAST_CODE.search(option):  # "PyQt6'da `QWidget.Policy` yerine": the code is the option
                        option = span.group(0)
                    option = option.strip(" `'\"的")
                    if option.count("`") % 2:  # cut inside a code span ("装 `claude-mem`"): no half a pair
                        option = option.replace("`", "")
                    option = _clip(option, 80)
                    if option and option not in rejected and not _POINTER.fullmatch(option):
                        rejected.append(option)
            why = _RATIONALE.search(plain)
            choice = _clip(sentence, 240)
            out.setdefault(choice, Decision(
                choice=choice,
                rationale=_clip(sentence[why.start(why.lastindex or 1):].strip(), 200) if why else "",
                rejected=tuple(rejected),
                evidence=f"msg {m.row_id}" if m.row_id is not None else None,
            ))
    return list(out.values())


#: How many of the kept choices a later one is compared with (``_restated``).
RESTATED_WITHIN = 40


def _words(text: str) -> frozenset[str]:
    return frozenset(w.lower() for w in _UNITS.findall(_CODE_SPAN.sub(lambda m: m.group(0).strip("`"), text)))


def restates(a: str, b: str) -> bool:
    """Whether two choices say the same thing: four in five words of the shorter (of at least three) shared."""
    x, y = _words(a), _words(b)
    return len(x & y) * 5 >= 4 * max(3, min(len(x), len(y)))


def _restated(decisions: list[Decision]) -> list[Decision]:
    """Each choice once: a later sentence that says the same again ("the databases use `Set` instead of `List`"
    three replies running; "Decision: 3 NAT Gateways (one per AZ)" and "For production, I chose 3 NAT Gateways - one per
    AZ") is dropped: the same options turned down and half the words, or four in five words of the shorter. A choice is
    compared with those turning down the same options and with the last ``RESTATED_WITHIN`` kept, so a reply of
    thousands of contrasts costs no quadratic pass."""
    kept: list[Decision] = []
    recent: list[frozenset[str]] = []
    by_rejected: dict[tuple[str, ...], list[frozenset[str]]] = {}
    for d in decisions:
        words = _words(d.choice)
        same_options = by_rejected.get(d.rejected, []) if d.rejected else []
        if any(len(words & w) * 2 >= len(words | w) for w in same_options) or any(
                len(words & w) * 5 >= 4 * max(3, min(len(words), len(w))) for w in recent[-RESTATED_WITHIN:]):
            continue
        kept.append(d)
        recent.append(words)
        if d.rejected:
            same_options.append(words)
            by_rejected[d.rejected] = same_options[-RESTATED_WITHIN:]
    return kept


def key_decisions(messages: Sequence[Message]) -> list[Decision]:
    """What the extractive note lists under key decisions: the firm candidates, recommendations included,
    without Markdown marks, each said once, at most ``MAX_DECISIONS`` of them from all along the session; and the
    options the user picked when the agent asked (``answered_questions``), in their place in the session."""
    answered = answered_questions(messages)
    found = [_plain(d) for d in decision_candidates(messages, recommendations=True) if _firm(d.choice)]
    if answered:
        # A candidate's evidence is its message row where the source keeps one; else the answers go first, as the
        # questions an agent asks come before the work they decide.
        at = {m.row_id: i for i, m in enumerate(messages) if m.row_id is not None}
        place = [(at.get(_row(d), len(messages)), 1, d) for d in found] + [(i, 0, d) for i, d in answered]
        found = [d for _i, _tie, d in sorted(place, key=lambda x: (x[0], x[1]))]
    return _strongest(_restated(found))


def _row(d: Decision) -> int | None:
    return int(d.evidence[4:]) if d.evidence and d.evidence.startswith("msg ") and d.evidence[4:].isdigit() else None


# --------------------------------------------------------------------------- questions the user answered

#: The tools an agent asks the user to pick from options with: Claude Code's ``AskUserQuestion``, Codex's
#: ``request_user_input``. Arguments: ``{"questions": [{"question", "header", "id", "options": [{"label",
#: "description"}], "multiSelect"}]}``.
_ASK_TOOLS = frozenset({"askuserquestion", "request_user_input"})
#: Claude Code's result: 'User has answered your questions: "Which backend?"="FastAPI", "Features?"="SSE, History".'
_CC_ANSWER = re.compile(r'"((?:[^"\\\n]|\\.)+)"="((?:[^"\\\n]|\\.)*)"')
#: SpecStory renders the call without arguments: each question bold, its options as "- **label** - description", and
#: the picks after "**Answer:**".
_SS_QUESTION = re.compile(r"^\*\*(?P<q>[^*\n]+)\*\*(?: _\(select multiple\)_)?[ \t]*\n\s*Options:[ \t]*\n"
                          r"(?P<opts>(?:[ \t]*- \*\*[^*\n]+\*\*[^\n]*\n?)+)", re.M)
_SS_OPTION = re.compile(r"^[ \t]*- \*\*(?P<label>[^*\n]+)\*\*(?:[ \t]+[-–—][ \t]+(?P<desc>[^\n]*))?", re.M)
_SS_ANSWER = re.compile(r"^\*\*Answer:\*\*[ \t]*(?P<a>[^\n]+)", re.M)


def answered_questions(messages: Sequence[Message]) -> list[tuple[int, Decision]]:
    """(message index, decision) for each question an agent asked with options and the user answered: the option
    picked is a decision, the ones not picked were turned down, and the picked option's own description (the
    agent's, quoted) is its reason. A question left unanswered (declined, failed) decides nothing."""
    results = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
    out: list[tuple[int, Decision]] = []
    replied: Message | None = None  # the last assistant message with words: what a user's bare "b" answers
    for i, m in enumerate(messages):
        if m.role == "user" and replied is not None and (
                picked := _picked_in_text(replied.content, m.content) or _taken_up(messages, i, replied)):
            out.append((i, picked.model_copy(update={"evidence": f"msg {m.row_id}"}) if m.row_id is not None else picked))
        if m.role == "assistant" and m.content.strip():
            replied = m
        for call in m.tool_calls if m.role == "assistant" else ():
            result = results.get(call.id or "")
            if call.name.lower() not in _ASK_TOOLS or result is None or not result.content.strip():
                continue
            for question, options, picked in _questions(call.arguments, result.content):
                chosen = [label for label, _desc in options if label in picked] if options else []
                said = ", ".join(chosen) if chosen else picked.strip()
                if not said:
                    continue
                why = next((desc for label, desc in options if chosen == [label] and desc), "")
                out.append((i, Decision(
                    choice=_clip(f"{_clip(question, 160)} → {said}", 240), rationale=_clip(why, 200),
                    rejected=tuple(_clip(label, 80) for label, _d in options if label not in chosen) if chosen else (),
                    evidence=f"msg {m.row_id}" if m.row_id is not None else None)))
    return out


#: A user's whole reply that tells the agent to go ahead with what it proposed ("ok do it", "yes please, go ahead").
_GO_AHEAD = re.compile(r"^(?:(?:ok(?:ay)?|yes|yeah|yep|sure|great|perfect|sounds good|looks good|lgtm)[,.!]?\s*)*"
                       r"(?:(?:please\s+)?(?:do it|go ahead|go for it|proceed|make it so|let'?s do (?:it|that|this)|"
                       r"implement it|do that|install it)(?:\s+please)?|please do)[.!]*$"
                       r"|^(?:好的?|可以|行)[，,。！!\s]*(?:就)?(?:这么|这样)?(?:做|办|干)(?:吧)?[。！!]*$", re.I)
#: The opening of a reply that answers "how do I …?" with one way: "Use a tiny shim script in ~/.local/bin that …",
#: "I'd recommend …", "The simplest way is …".
_PROPOSAL = re.compile(r"^(?:(?:I(?:'d| would)?|we(?:'d| would)?)\s+(?:recommend|suggest)\b|(?:the\s+)?(?:best|simplest|"
                       r"cleanest|easiest|quickest|safest|recommended)\s+(?:way|option|approach|fix|route)\s+is\b"
                       r"|(?:use|add|create|install|wrap|switch to|move|put|write|keep|replace|pin|set)\s+(?:a|an|the|your|"
                       r"`)?)", re.I)
#: A user's question that asks for a way ("How can I install …?", "What's the best way to …?", "Should I …?").
_ASKS_HOW = re.compile(r"^\W*(?:how\b|what(?:'s| is) the (?:best|simplest|right|cleanest) way\b|should (?:I|we)\b|"
                       r"can (?:I|we|you)\b|is there a way\b|怎么|如何|怎样)", re.I)


def _taken_up(messages: Sequence[Message], at: int, replied: Message) -> Decision | None:
    """The way an agent proposed, in answer to the user's "how can I …?", that the user's next message tells it to go
    ahead with ("ok do it"): a decision, the reply's opening sentence its choice and the reason it gave for it (a
    "because"/"so" in that sentence, else the finding the agent reported before it in the same turn)."""
    if not _GO_AHEAD.match(" ".join(user_words(messages[at].content).split())):
        return None
    asked = next((i for i in range(at - 1, -1, -1) if messages[i].role == "user" and _kind(messages[i]) == "ask"), None)
    if asked is None or not _ASKS_HOW.match(" ".join(user_words(messages[asked].content).split())):
        return None
    sentences = _sentences(_prose(replied.content))
    if not sentences or not _PROPOSAL.match(_straight(sentences[0])):
        return None
    choice = sentences[0]
    why = _RATIONALE.search(_straight(choice))
    reason = choice[why.start(why.lastindex or 1):].strip() if why else ""
    if not reason:
        said = [x for m in messages[asked + 1:at] if m.role == "assistant" and m is not replied and m.content.strip()
                for x in _sentences(_prose(m.content))]
        reason = next((x for x in reversed(said) if _REASON.search(_straight(x)) or re.search(r",\s+so\s", x)), "")
    return Decision(choice=_clip(unmark(choice), 240), rationale=_clip(unmark(reason), 200))


def _questions(args: object, result: str) -> list[tuple[str, list[tuple[str, str]], str]]:
    """(question, [(option label, description)], what the user picked, as text) for each question answered."""
    asked = args.get("questions") if isinstance(args, dict) else None
    if isinstance(asked, list) and asked:
        picks = _picks(result)
        found = []
        for q in asked:
            if not isinstance(q, dict) or not isinstance(q.get("question"), str):
                continue
            options = [(str(o.get("label")).strip(), str(o.get("description") or "").strip())
                       for o in q.get("options") or () if isinstance(o, dict) and o.get("label")]
            picked = picks.get(" ".join(q["question"].split())) or picks.get(str(q.get("id") or "")) or ""
            if picked:
                found.append((" ".join(q["question"].split()), options, picked))
        return found
    answer = _SS_ANSWER.search(result)
    if answer is None:
        return []
    return [(" ".join(q.group("q").split()),
             [(o.group("label").strip(), (o.group("desc") or "").strip()) for o in _SS_OPTION.finditer(q.group("opts"))],
             answer.group("a")) for q in _SS_QUESTION.finditer(result[:answer.start()])]


def _picks(result: str) -> dict[str, str]:
    """Question (or Codex's question id) → the answer text, from the tool's result."""
    text = result.strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        answers = data.get("answers") if isinstance(data, dict) else None
        if isinstance(answers, dict):
            return {str(k): ", ".join(str(a) for a in v.get("answers") or ()) for k, v in answers.items()
                    if isinstance(v, dict)}
    return {" ".join(q.replace('\\"', '"').split()): a.replace('\\"', '"') for q, a in _CC_ANSWER.findall(text)}


# An agent may ask in its own words, its options a table ("| B | Present a disambiguation list |", spec-kit's clarify
# step) or a list ("A) 2 attempts", "**Option B:** …", "1. …"), and the user answers with the option's label alone.
_OPTION_ROW = re.compile(r"^\|\s*(?:\*\*)?(?:Option\s+)?([A-Z]|\d{1,2})(?:\*\*)?\s*\|\s*(.+?)\s*\|", re.M)
_OPTION_LINE = re.compile(r"^[ \t]*(?:[-*][ \t]+)?(?:\*\*)?(?:Option[ \t]+)?([A-Z]|\d{1,2})(?:[.):]|\*\*)+[ \t]*(?:\*\*)?"
                          r"[ \t]*(?:[-–—:][ \t]*)?(\S.*)$", re.M)
#: "**Recommended:** Option B — It minimizes incorrect estimates…": the agent's own reason for an option.
_RECOMMENDED = re.compile(r"\bRecommended:?(?:\*\*)?:?\s*(?:Option\s+)?([A-Z]|\d{1,2})\b\s*[-–—:]*\s*(.*)", re.I)
#: The question an option list answers: the last line that asks, else a "Question 3: …" heading or bold line (another
#: heading, "## Summary", names no question).
_QUESTION_HEAD = re.compile(r"^(?:#{1,6}\s*|\*\*)(?:Question|Pregunta|Frage|Questão|问题|問題|質問|질문)\s*\d*\s*[:.：]\s*"
                            r"(.+?)\s*(?:\*\*)?\s*$", re.M)
#: A reply that is an option's label and nothing more ("b", "Option B", "2."), or takes the recommendation.
_BARE_PICK = re.compile(r"^(?:option\s*)?([a-z]|\d{1,2})[.)]?$", re.I)
_TAKES_RECOMMENDED = re.compile(r"^(?:yes|y|ok|okay|recommended|sí|si|sim|oui|ja|是|好|可以|はい)[.!]?$", re.I)


def _picked_in_text(asked: str, reply: str) -> Decision | None:
    """The option a user's bare reply picks from the options an agent's message offered in its own words, as a
    decision: the question and the option's description, the others turned down, the agent's recommendation as its
    reason when that is the one picked. None when the reply is more than a label or the message offered no options."""
    typed = " ".join(reply.split())
    if len(typed) > 12:
        return None
    rows = _OPTION_ROW.findall(asked)
    options = [(label.upper(), desc) for label, desc in (rows if len(rows) >= 2 else _OPTION_LINE.findall(asked))]
    labels = [label for label, _desc in options]
    # Options are a run of labels in order (A, B, C… or 1, 2, 3…), at least two of them.
    if len(options) < 2 or labels != [*dict.fromkeys(labels)] or labels[:2] not in (["A", "B"], ["1", "2"]):
        return None
    recommended = _RECOMMENDED.search(asked)
    if bare := _BARE_PICK.match(typed):
        label = bare.group(1).upper()
    elif _TAKES_RECOMMENDED.match(typed) and recommended:
        label = recommended.group(1).upper()
    else:
        return None
    desc = next((d for lbl, d in options if lbl == label), None)
    if not desc:
        return None
    head = asked[:asked.find(desc)]
    heads = _QUESTION_HEAD.findall(head)
    asks = [x for x in (line.strip() for line in head.splitlines()) if x.endswith(("?", "？"))]
    question = unmark(asks[-1] if asks else heads[-1] if heads else "")
    why = recommended.group(2).strip() if recommended and recommended.group(1).upper() == label else ""
    return Decision(choice=_clip(f"{_clip(question, 160)} → {unmark(desc)}" if question else unmark(desc), 240),
                    rationale=_clip(unmark(why), 200),
                    rejected=tuple(_clip(unmark(d), 80) for lbl, d in options if lbl != label and d))
