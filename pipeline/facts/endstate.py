"""How a session ended: ``resolved``, ``unresolved``, ``failed`` or ``unknown``, from the transcript.

Both summarisers use this: the extractive one directly, the LLM one as the grounded end state it
never lets the model override (``pipeline/summarize/mapreduce.py``). The rule is **never claim success when
unsure**: a note that says "resolved" is what a later reader, or agent, trusts instead of checking
the work again, so a false success costs far more than an honest "unknown", which only invites a
look. When the signals disagree the answer is "unknown" or "unresolved", never "resolved" (the
evals gate ``false_success`` at zero).

The judgement is about the *last turn*: the last ask, or a later ack that hands the turn back
("continue", "yes", see ``pipeline/facts/turns.py``), and the messages after it up to a closing ack
("thanks, that's all"). In order, first match wins:

* **unknown**: the user never asked anything.
* **unresolved**: the user rolled the work back (``/undo``, ``/rewind``, ``/revert``).
* **failed**: a tool failed after the last successful tool call and the final reply does not
  claim the work done.
* **unresolved**: no assistant reply, or (unless the user closed) the agent stopped mid-work: the
  transcript ends on a tool call or result (unless the last reply already reported the work done),
  inside a code block, on a colon, or on an announcement of the next step ("let me …", "让我…").
* **failed / unresolved**: the final reply says it could not do it ("couldn't", "still failing",
  "无法", "não consegui"): failed if a tool failure is still unfixed, unresolved otherwise. A
  failure word that only names a condition ("falls back when the query 失败时") says nothing, and
  in a review of a plan only the agent's own failure counts ("I couldn't open the spec"): what
  the review finds the plan cannot do is its answer.
* **unresolved**: the last ask is a complaint ("still broken", "还是不行") and the final reply
  does not claim a fix.
* **resolved**: the final reply claims completion ("done", "tests pass", "已修复", "concluído")
  with no failure wording; but **unknown** if a tool failure is still unfixed, since the claim
  and the evidence disagree.
* **unresolved**: the final reply ends on a question to the user, who never answered or closed.
* **resolved**: the user closed the work, or the last turn was a question, a request for
  information or instructions ("give me steps to …"), for a text the reply delivers ("write a
  commit message for these changes") or for a review of a plan or design, not a request for work
  nor a problem report such as "why does the build fail?", which only a fix answers, and the agent
  answered it without changing a file or announcing further work.
* **unknown**: anything else.

The completion and failure wording (``_DONE``, ``_FAILED``, ``_claims_done``) and the tool signal
(``_tool_signal``) are also what the extractive summariser's phase outcomes use, so a phase and
the session it belongs to are judged with one vocabulary. Replies follow the user's language, so
the tables cover English and Chinese, plus the commonest pt/es/fr/de phrasings.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pipeline.facts.derive import (
    COMMAND_TOOLS,
    call_command,
    file_touches,
    found_nothing,
    parse_result,
    result_failed,
    saved_files,
    shows_edit,
    user_rejected,
)
from pipeline.facts.turns import (
    _ack_role,
    _is_ack,
    _kind,
    _live,
    _prose,
    _replies,
    _sentences,
    _until_closer,
    echoes,
    harness_error,
    split_paste,
    user_words,
)
from pipeline.models import EndState, Facts, Message, Session, ToolCall, is_scratch
from pipeline.screen import Screen

_DONE = re.compile(
    r"\b(?:done|fixed|resolved|completed?|implemented|added|created|updated|removed|deleted|replaced|renamed|"
    r"committed|pushed|merged|"
    r"(?:all )?(?:\d+ )?tests? (?:now )?pass(?:es|ed|ing)?|works now|now works|finished"
    # the state the work left: "Project **olympios** is now active", "the hooks are now installed"
    r"|(?:is|are) now (?:active|activated|enabled|installed|configured|set up|in place|live|connected|running)"
    r"|(?:is|are) now (?:\w+ )?(?:fixed|resolved|ready))\b"
    r"|已完成|完成了|已修复|修复了|搞定|已提交|已创建|已添加|已更新|已删除|已移除|已修改|已替换|测试通过|全部通过"
    # the Chinese of "pushed", "merged", "committed", "implemented", "resolved" above
    r"|已(?:经)?(?:推送|合并|实现|解决)|(?:推送|合并|提交)成功|成功(?:推送|合并|提交)"
    # "更新了两个 skill", "已統一 PR 描述格式", Traditional characters too
    r"|(?:更新|修改|新增|添加|删除|刪除|创建|建立|修正|调整|調整|统一|統一)了|已(?:统一|統一|调整|調整|修正|建立|刪除|新增)"
    r"|(?:我|我们)(?:已经|已)[^。！？\n]{0,40}?(?:修改|替换|更新|添加|删除|移除|改|实现|完成|修复|创建|调整|重构)"
    # Japanese: "ビルドが成功しました", "修正しました", "エラーは解消済みです", "対応完了"
    r"|(?:完了|成功|修正|解消|対応|追加|更新|削除|実装|作成|変更|反映|プッシュ|コミット|マージ|デプロイ|インストール|保存|設定"
    r"|適用|生成|移動|置換|統合|導入|整理|書き換え|書き直し|アップロード|配置|公開)(?:しました|いたしました|済み|完了)"
    # Korean, formal and casual: "생성 완료했습니다", "수정했습니다", "테스트가 통과했습니다", "만들어뒀어"
    r"|(?:완료|수정|추가|생성|해결|업데이트|반영|푸시|커밋|배포|설치|적용|변경|구현|작성|삭제|저장)(?:을 |를 | )?(?:했습니다|하였습니다"
    r"|했어요|했어|됐습니다|되었습니다|됐어|완료)|통과했(?:습니다|어요|어)|만들었(?:습니다|어요|어)|만들어\s?(?:뒀|놨)어"
    # pt/es/fr/de: the session's own language, since replies follow the user
    r"|\b(?:conclu[íi]d[oa]s?|resolvid[oa]s?|corrigid[oa]s?|com sucesso|resuelt[oa]s?|corregid[oa]s?|con éxito"
    r"|terminé|corrigée?s?|résolue?s?|erledigt|behoben|gelöst"
    # the "created", "pushed", "deleted", "renamed", "merged", "deployed" the English list has
    r"|créée?s?|poussée?s?|supprimée?s?|renommée?s?|fusionnée?s?|déployée?s?|commitée?s?"
    r"|cread[oa]s?|subid[oa]s?|eliminad[oa]s?|renombrad[oa]s?|fusionad[oa]s?|desplegad[oa]s?"
    r"|criad[oa]s?|removid[oa]s?|renomead[oa]s?|mesclad[oa]s?|implantad[oa]s?"
    r"|erstellt|gepusht|gelöscht|umbenannt|zusammengeführt|gemergt|deployt"
    # the "implemented" and "updated" the English list has ("added" left out: "He agregado logging para debuggear"
    # reported a debugging step, not a fix, on a session the user still said was broken)
    r"|implementad[oa]s?|se implementó|implementé|implementei|actualizad[oa]s?|atualizad[oa]s?"
    r"|implémentée?s?|mise? à jour|implementiert|aktualisiert"
    # "Ya generé y apliqué las migraciones", "Já corrigi o import": "already" and a first-person past
    r"|ya (?:he |hemos )?[a-záéíóúñ]{3,}(?:é|í|ado|ido|amos)|já [a-zãáâéêíóõúç]{3,}(?:ei|i|amos))\b"
    # Persian "حل شد(ند)", "انجام شد", "اصلاح شد", "اضافه شد", "ایجاد شد", "به‌روزرسانی شد"
    r"|(?:حل|انجام|اصلاح|اضافه|ایجاد|به‌?روزرسانی|برطرف|رفع) (?:شد|شدند)(?!\w)"
    # Russian: "Готово, Лиза. Все файлы переименованы и разложены по папкам." (a blind set's success read as no claim)
    r"|(?<!\w)(?:готово|сделано|выполнено|завершено|исправлен[оаы]?|исправил[аи]?|создан[оаы]?|создал[аи]?"
    r"|обновлен[оаы]?|обновил[аи]?|удален[оаы]?|удалил[аи]?|переименован[оаы]?|перемещен[оаы]?|разложен[оаы]?"
    r"|закоммитил[аи]?|запушил[аи]?)(?!\w)", re.I)
_FAILED = re.compile(
    r"\b(?:still (?:fail\w*|broken|errors?|crash\w*)|couldn'?t|could not|can'?t|cannot|unable to|failed to|"
    r"not able to|doesn'?t work|blocked|(?:hit|reached) (?:the|my|a) (?:(?:\w|-)+ ){0,2}limit"
    r"|ran out of (?:time|budget|iterations|attempts|turns|tokens))\b|无法|失败|仍然报错|还是报错|没能"
    r"|\b(?:não (?:consegui|foi possível|pude)|falhou|no (?:pude|fue posible|se pudo|he podido|logr[ée])|falló"
    r"|n'ai pas pu|échoué|konnte nicht|fehlgeschlagen"
    r"|не удалось|не получилось|не смог(?:ла|ли)?|başarısız|yapamadım|başaramadım)\b"
    r"|失敗しました|できませんでした|解決できません|確認できませんでした|動作しませんでした", re.I)
_USER_UNHAPPY = re.compile(
    r"\b(?:still (?:broken|failing|fails|not|doesn'?t|the same)|doesn'?t work|not working|didn'?t work|same error|"
    r"(?:does|did)(?:n'?t| not) (?:solve|fix|help)|(?:is|was)(?:n'?t| not) (?:solved|fixed)|"
    r"try again|wrong|no (?:change|effect)|nothing changed)\b|还是不行|不行|没用|报错|还是错|还是这样|没有(?:改变|变化|效果|生效)"
    r"|没效果|没生效"
    # the session's own language, as the replies' tables have it: "No funciona", "Los botones siguen ahí", "ainda não
    # funciona", "ne marche toujours pas", "geht immer noch nicht", "всё ещё не работает", "hâlâ çalışmıyor"
    r"|\b(?:no (?:funciona|sirve|cambi[óo]|pasa nada)|sigue(?:n)? (?:sin|igual|ah[ií]|fallando|dando)|todav[ií]a no"
    r"|a[uú]n no|mismo error|n[ãa]o (?:funciona|funcionou|mudou|deu certo|resolveu)|ainda n[ãa]o|continua (?:igual|dando"
    r"|com|sem)|mesmo erro|nada mudou|ne (?:marche|fonctionne) (?:toujours )?pas|toujours pas|m[êe]me erreur"
    r"|(?:funktioniert|geht|klappt) (?:immer noch |noch )?nicht|immer noch|gleiche[rn]? fehler"
    r"|не работа\w*|вс[её] ещ[её]|по-прежнему|та же ошибка|ничего не изменилось|не получилось|не помогло"
    r"|çalışmıyor|hâlâ|hala (?:çalışmıyor|aynı|olmuyor|hata)|aynı hata|olmadı|düzelmedi|değişmedi)\b"
    # "まだ動きません", "エラーが出ました", "直っていません", "変わりません"
    r"|まだ(?:動|直|エラー|表示され)|動きません|動かない|直っていない|直っていません|変わりません|変わらない"
    r"|エラーが(?:出|発生)", re.I)
# The agent announces work it then never does: the export stopped mid-turn.
_NEXT_STEP = re.compile(
    r"^(?:(?:alright|all right|ok(?:ay)?|now|next|so|then|first)[,\s]+)*(?:let me(?! know)|let[’']s|i[’']m going to|"
    r"i am going to|(?:i|we)(?:[’']ll| will) (?:now|next|start|begin|proceed|go ahead|run|check|look|update|fix|add|"
    r"create|write|read|apply|edit|modify|implement|commit|push|test|try|investigate|search|open|install|remove|"
    r"delete|continue))\b|^(?:现在|接下来|下面|然后|首先)?[，,]?(?:让我|我来|我将|我们来|让我们"
    # "我先清理构建目录，再重新构建" (I'll first…), "我马上/这就/接着…": the Chinese of "first I'll", "I'll now"
    r"|(?:我|我们)(?:先|马上|这就|接着))"
    # "Vamos a verificar…", "Vou verificar…", "Je vais…", "Lass mich…", "Давайте проверим…", "Сейчас я проверю…"
    r"|^(?:(?:ahora|agora|maintenant|jetzt|теперь|сейчас)[,\s]+)?(?:voy a|vamos a|d[ée]jame|perm[íi]teme|vou|vamos"
    r"|deixe-me|deixa-me|deixa eu|je vais|laissez-moi|voyons|ich werde|lass mich|lassen sie mich|давай(?:те)?"
    r"|я (?:сейчас )?(?:проверю|посмотрю|исправлю|добавлю|создам|запущу|изменю|обновлю))(?![^\W\d_])", re.I)
# A request for an answer rather than for work: its deliverable is the reply itself.
_INFO_ASK = re.compile(
    r"\b(?:explain|summari[sz]e|describe|tell me|show me|list|output|print|direct me|point me|what|why|how|which"
    r"|where|when|who|walk me through|analy[sz]e|compare|calculate|compute"
    # "give me steps to do this …", "give me the exact commands": instructions, delivered in the reply
    r"|give me (?:the |some |a |an )?(?:exact |detailed |clear |quick |short )?(?:steps|instructions|commands"
    r"|walkthrough|guide|overview|summary|rundown|breakdown|explanation))\b|给我[^，。！？\n]{0,10}步骤|解释|說明|说明|总结|總結|介绍|介紹|分析|输出|輸出|列出|告诉我|告訴我|是什么|是什麼|为什么|為什麼"
    r"|怎么|怎麼|如何|吗|嗎|是否|有没有|呢[？?]?$|[?？]\s*$"
    r"|教えて|説明して|なぜ|どうして|どのように|ですか|ますか|でしょうか", re.I)
# A request to check that something holds ("check that there are no blocking dependencies in tasks.md", "verify
# whether the migrations match the models"): a question in the imperative, answered by what the check finds.
# So is a yes/no question whether a problem is left ("any issues?", "is there a problem?", "var mı bir sorun?",
# "还有问题吗？", "問題はありますか？"): it names a problem it asks about, it reports none.
_CHECK_ASK = re.compile(
    r"^(?:please\s+)?(?:check|verify|confirm|make sure|ensure|double[- ]check)\s+(?:that|whether|if)\b"
    r"|^(?:(?:so|and|ok(?:ay)?)[,\s]+)?(?:are there|is there|any)(?: \w+){0,2} (?:issues?|problems?|errors?|bugs?)"
    r"(?: \w+){0,3}\s*[?？]$|^(?:bir )?(?:sorun|problem|hata) var m[ıi]\s*[?？]?$|^var m[ıi] bir (?:sorun|problem|hata)\s*[?？]?$"
    r"|^(?:还)?(?:有没有|有)(?:什么)?问题(?:吗|么)?\s*[?？]$|^問題(?:は|が)?(?:あります|ある)か?\s*[?？]?$", re.I)
# Work asked for politely as a question ("can you add tests?", "高度可以调整小一些吗").
_WORK_REQUEST = re.compile(r"\b(?:can|could|would|will) you\b(?!\s+(?:explain|tell|show|describe|summari[sz]e|list))"
                           r"|^please\b|请你|请帮|帮我|帮忙|麻烦|可以|能否|能不能|可不可以|要不要", re.I)
# A request for a piece of prose the reply itself delivers ("Please write a commit message for these changes",
# "draft the PR description", "Say 'hello' and nothing else"): asked politely or not, its deliverable is the reply,
# as a question's is. Only artefacts that are prose by nature: "write an error message" is work on the code.
_TEXT_ASK = re.compile(
    r"\b(?:write|draft|compose|suggest|generate|give me|propose|come up with|prepare)(?: (?:me|us))?"
    r"(?: (?:a|an|the|some|one|two|three|\d+))?(?: [\w-]+)?(?: [\w-]+)? (?:commit messages?|commit titles?"
    r"|(?:pr|pull request|merge request) (?:descriptions?|titles?|bod(?:y|ies))|release notes|changelog entr(?:y|ies)"
    r"|e-?mails?|tweets?|taglines?|slogans?|cover letters?)\b"
    r"|^(?:say|reply with|respond with|answer with)\b"
    r"|写(?:一个|一段|一条|个|一下)?(?:提交信息|提交说明|commit ?message|邮件|发布说明)"
    r"|(?:commit ?message|コミットメッセージ|PR ?(?:説明|本文|の説明)|プルリク(?:エスト)?の説明)(?:を|に)?[^。？\n]{0,20}?"
    r"(?:作って|書いて|考えて|作成して)", re.I)
# A request for a write-up of what happened ("make a report so the other branches can fix it", "post-mortem"): prose
# the reply delivers, like a commit message.
_REPORT_ASK = re.compile(
    r"\b(?:make|write|create|prepare|give me|draft)(?: (?:me|us))? (?:a |an |the )?(?:short |brief |detailed )?"
    r"(?:report|post-?mortem|write-?up|summary|explanation|analysis)\b|(?:写|做|给我)(?:一份|一个|个)?(?:报告|总结)"
    r"|(?:レポート|報告書|まとめ)を?(?:作って|書いて|作成)", re.I)
# A request to review a plan, a design or a proposal: the review is the deliverable, and what it finds wrong ("the
# dispatch cannot represent mixed inputs", "potential issues") is about the plan, not a failure of the work.
_REVIEW_ASK = re.compile(
    r"\b(?:review|critique|assess|evaluate|audit|poke holes in|sanity[- ]check)(?: (?:this|the|my|our|that|a))?"
    r"(?: [\w-]+)?(?: [\w-]+)? (?:plans?|designs?|proposals?|spec(?:ification)?s?|approach|architecture|rfcs?|outline"
    r"|strateg(?:y|ies))\b|(?:评审|审查|审核|点评)(?:一下)?(?:这个|这份|我的)?[^，。！？\n]{0,8}(?:方案|计划|设计)", re.I)
# "… and then implement it", "review the spec, then fix what you find", "write a commit message and push": a review
# or a text that asks for the work too.
_AND_WORK = re.compile(r"\b(?:then|and|after that|afterwards)\b[^.?!\n]{0,40}?\b(?:implement|apply|fix|update|build|make"
                       r"|change|execute|write|add|create|refactor|start|commit(?! messages?\b)|push|merge|deploy|send|open|publish)\b"
                       r"|(?:然后|并|再)[^。！？\n]{0,10}(?:实现|修改|修复|开始|提交|推送|部署|发送)", re.I)


def _is_review(prose: str) -> bool:
    """The ask asks for a review of a plan or a design, and for nothing more (``_REVIEW_ASK``, ``_AND_WORK``)."""
    return bool(_REVIEW_ASK.search(prose)) and not _WORK_REQUEST.search(prose) and not _AND_WORK.search(prose)


# Failure wording about the agent's own attempt, whatever the subject of the rest of the reply: "I couldn't open the
# repository", "我无法访问", "não consegui".
_OWN_FAILURE = re.compile(
    r"\b(?:i|we)(?: (?:still|just|also))? (?:couldn[’']?t|could not|can[’']?t|cannot|wasn[’']?t able|was not able"
    r"|weren[’']?t able|were not able|am unable|was unable|were unable|failed to|am not able|did not manage"
    r"|didn[’']?t manage)\b|\bi[’']m (?:unable|not able)\b|(?:hit|reached) (?:the|my|a) (?:(?:\w|-)+ ){0,2}limit"
    r"|ran out of (?:time|budget|iterations|attempts|turns|tokens)|(?:我|我们)(?:暂时|还是|仍然|还|仍)?(?:无法|没能|未能|不能|没法|没办法)"
    r"|\b(?:não consegui|no pude|n'ai pas pu)\b|できませんでした|失敗しました", re.I)
# A question about the state of the work itself ("did the tests pass?", "is it deployed?", "what's the status of the
# deploy?", "成功了吗"): its answer is the work's outcome, so only a claim of success that survives the vetoes resolves
# it; "Not yet; 3 tests are still red" answers the question and reports the work unfinished.
_STATUS_ASK = re.compile(
    r"\b(?:did|does|do|is|are|has|have|was|were) (?:it|this|that|they|everything|(?:all )?the \w+(?: \w+)?) (?:now )?"
    r"(?:work|pass|succeed|build|deploy|run|finish|complete|done|working|fixed|passing|green|deployed|finished|ready"
    r"|built|merged|pushed)\b|\bwhat(?:[’']s| is) the (?:status|state|outcome|result)\b"
    r"|(?:成功|好|通过|完成|修好|部署好|跑通)了(?:吗|没|没有)|是否(?:成功|通过|完成)", re.I)
# A problem report phrased as a question ("why does the build fail?") is answered only by a fix.
_PROBLEM = re.compile(
    r"\b(?:fail\w*|error\w*|broken|crash\w*|bug|exception|issues?|problems?|not working|doesn'?t work|won'?t)\b"
    r"|失败|报错|错误|异常|不行|无法|没有生效|不工作|崩溃"
    # pt/es/fr/de/ru/tr: "por que não funciona?", "¿por qué falla?", "почему ошибка?", "neden çöktü?"
    r"|\b(?:erro|errores|falh\w*|fall[aóo]\w*|n[ãa]o funciona|no funciona|problemas?|excepci[óo]n|exce[çc][ãa]o|erreur\w*"
    r"|[ée]choue\w*|plante|probl[èe]mes?|ne (?:marche|fonctionne) pas|fehler\w*|schl[äa]gt fehl|funktioniert nicht"
    r"|absturz\w*|ошибк\w*|не работа\w*|баг\w*|сбо[йи]\w*|пада\w*|проблем\w*|hata\w*|çalışmıyor|çöktü|sorun\w*"
    r"|quebr\w*)\b"
    # a symptom is a problem too: "why is the signup page blank?", "页面空白", "按钮没反应"
    r"|\b(?:blank|stuck|hangs?|hanging|freez\w*|frozen|404|500|not (?:showing|loading|rendering|updating|saving"
    r"|displaying|responding|appearing)|(?:doesn|isn|won|can)[’']?t(?: [\w-]+){0,3}? (?:show|load|render|update|save|display|respond"
    r"|appear|connect|start|open|find|log ?in|be found))\b|空白|白屏|不显示|没显示|显示不出|没反应|卡住|卡死|打不开|找不到",
    re.I)
_UNDO = re.compile(r"^/(?:undo|rewind|revert)\b", re.I)
# A run the harness itself reports as failed (ShareGPT ``completed: false``, a request dump written after
# retries ran out, an iteration budget). Hermes's ordinary closes (``idle_timeout``, ``user_exit``...) are not.
_RUN_FAILED = re.compile(r"^(?:failed|error|crash\w*|abort\w*|max_retries_exhausted|\w*budget_exhausted"
                         r"|max_iterations\w*|iteration_limit\w*|interrupted)$", re.I)
_IF = re.compile(r"^(?:if|should|in case|whenever|如果|若|假如|万一|要是)", re.I)
# A reply whose last line stops on a word no sentence ends with ("Using the new `defineNuxtConfig`
# function in"), or on a comma: the model's output limit or the export cut it mid-sentence.
_MID_SENTENCE = re.compile(
    r"(?:\b(?:a|an|the|and|or|but|of|to|for|with|by|from|into|that|which|your|its|their|this|these|is|are"
    r"|(\w+) (?:in|on))|[,，、(（])$", re.I)
# "in"/"on" after a verb that takes them as a particle ("logged in", "turn it on") do end a sentence.
_PARTICLE_VERB = re.compile(r"(?:log|sign|opt|plug|check|turn|switch|carry|go|went|gone|mov|keep|kept|hold|held"
                            r"|put|built?|based|depend|rel[yi])|(?:it|them|one|back|over)$", re.I)
# A closing report that says part of the work is still open: remaining failures, work left, not done yet.
_LEFT_OVER = re.compile(
    r"\b(?:remaining (?:work|failures|issues|tasks|items|problems|errors)|(?:still|are) (?:failing|broken)"
    r"|(?:\d+|some|few|several) (?:tests? |checks? |specs? )?(?:still )?(?:fail(?:ed|ing|s)?|broken)"
    r"|not (?:yet )?(?:complete|finished|done|fixed|implemented)"
    # ("an incomplete scan's rows" describes a thing; "the migration is incomplete" reports work left)
    r"|(?:is|are|was|were|remains?|still|left|stays?) incomplete|^incomplete\b|incomplete\s*[:：]"
    r"|partially (?:done|complete|implemented|fixed)|left to do|yet to be (?:done|fixed|implemented)"
    r"|work in progress|hand-?off"
    # a status the reply gives an item of its own report ("Explicit Out-of-Scope: Outstanding"), "the outstanding item"
    r"|(?<=[:：] )\**outstanding\b|outstanding (?:items?|issues?|work|tasks?|questions?|to-?dos?|points?)"
    r"|(?:done|finished|complete|completed|implemented|migrated),? except)\b|\btodo:"
    r"|剩余(?:的)?(?:问题|工作|任务|失败)|仍有.{0,12}(?:失败|问题|报错)|还有.{0,12}(?:失败|报错|没有完成|未完成)"
    r"|未完成|尚未(?:完成|实现|修复)|部分完成|待(?:完成|修复|处理)"
    r"|(?:剩下|还剩)(?:的)?[^。！？\n]{0,8}(?:需要|还要|没有|没|未|待|要)", re.I)
_HANDOFF = re.compile(r"hand-?o(?:ff|ut)", re.I)
# A failure the same sentence says the work did not cause ("2 failed (unrelated)", "pre-existing failures remain") is
# not work left over by this task.
_NOT_OURS = re.compile(r"\b(?:unrelated|pre-?existing|already (?:failing|broken)|existing failures?|flaky)\b"
                       r"|无关|之前就(?:有|存在)|原有的", re.I)

# A completion word that claims nothing: negated just before it ("didn't complete", "no stages have been
# completed", "没有完成") or still pending ("once processing is complete", "it will be updated", "ready to be
# merged", "I need to finish"). The gap between the two is a few plain words, never a conjunction or a
# comma, so "No more errors; all tests pass", "there were no failures and everything completed" and "I was
# able to fix it" still claim.
_LOOKBACK = 120  # characters before a completion word where its negation or modal can sit
_GAP = r"(?:[^\S\n]+(?!(?:and|but|so|then|or|all|everything|every|now)\b)[\w’'-]+)"
_NEGATED = re.compile(r"(?:\b(?:not|never|no|nothing|none|yet to|without|failed to|unable to|cannot"
                      r"|pas|jamais|não|nunca|nicht|nie|kein\w*|не|ни)\b|n[’']t\b"
                      r"|未|没有|没|尚未)" + _GAP + r"{0,3}[^\S\n]*$"
                      # Chinese has no spaces to count words by: a few characters ("不是正常完成", "还没有全部完成")
                      r"|(?:不是|并非|还没|未能|没能)[^\s。！？，,；;]{0,4}$", re.I)
_PENDING = re.compile(
    r"(?:\b(?:once|until|till|unless|wait(?:ing)? for)" + _GAP + r"{0,4}"
    r"|\b(?:will|would|should|could|can|must|may|might|needs? to|ha(?:s|ve) to|going to|wants? to|trying to"
    r"|plan(?:s|ning)? to|still to|to be)(?:[^\S\n]+(?:not|also|then|still|first|be|get|have|been|fully|properly))*"
    r")[^\S\n]+$"
    # 会/将/要/可以/就能 完成, and a time a step will take ("注册一个（免费，1分钟搞定）", "5 分钟就能完成"): a promise
    r"|(?:(?<![机一学])会|将|(?<![主重只])要|需要|可以|才能|就能|即可|能够)[^\s。！？，,；;]{0,2}$"
    r"|(?:\d+|[一二两三四五六七八九十几半])[^\S\n]*(?:秒|分钟|分|小时|天)(?:内|左右)?(?:就|就能|即可|可以)?[^\S\n]*$", re.I)
# A reply that reports a problem still there, beside whatever it claims: "but I'm encountering an
# issue", "the template was created but no tokens were detected", "the tool is not available", "which
# is unusual". Warnings are not problems (a pipeline passes with approved warnings); a problem the same
# sentence then says was fixed ("found an issue and fixed it") is not one either.
_PROBLEM_REPORT = re.compile(
    r"\b(?:i[’']?m (?:encountering|seeing|getting|hitting|running into|having)|i am (?:encountering|seeing|getting"
    r"|hitting|running into|having)|ran into|running into|encountered|there[’']?s|there (?:is|are|was|were|seems to be"
    r"|appears to be)|shows?|showing|found|returned|reports?)"
    # ("the linter reports 0 issues" is a clean result: a zero count reports nothing)
    r" (?:(?:some|an?|one|a few|several|two|three|[1-9]\d*) )?(?:(?!no\b|zero\b|0\b)[\w-]+ )?(?:issues?|problems?|errors?|bugs?)\b"
    r"|\b(?:not|n[’']t|never) (?:been |yet )?(?:available|found|extracted|detected|present|supported|exist\w*"
    r"|appear\w*|recogni[sz]ed|generated|saved|loaded|advanced|transitioned)\b"
    r"|\b(?:is|are|was|were|seems?|looks?|appears?) (?:still |to be |very |quite )?(?:unexpected|unusual|strange|odd"
    r"|wrong|empty|incorrect|broken)\b"
    # ("flags one domain with many identities, but not one identity across domains" draws a line, reports nothing)
    r"|\b(?:but|however)\b(?!,?\s+not\b)[^.;:]{0,160}?\b(?:no|not|none|nothing|zero)\b"
    r"|(?:但|不过|可是)[^。！？\n]{0,30}?(?:没有|未能|失败|报错|错误)|(?:出现|遇到|存在)了?(?:一些|一个|几个)?(?:问题|错误|异常)",
    re.I)
_FIXED_AFTER = re.compile(r"\b(?:fixed|resolved|addressed|handled|corrected|solved|worked around)\b|修复|解决", re.I)
# A problem the same sentence waves off is reported, not open: "these are just informational", "likely
# just formatting issues and the user approved the warnings", "this doesn't affect the data". And an
# instruction quoted back ("Do NOT call X, it is not available") reports nothing.
_DISMISSED = re.compile(
    r"\b(?:just|only|merely|purely) (?:informational|cosmetic|formatting|display|warnings?|a warning|minor)"
    r"|\b(?:does ?n[’']?o?t|won[’']t|will not|should ?n[’']t) (?:affect|impact|matter|block|break)"
    r"|\bnot (?:a|an) (?:real |actual )?(?:problem|issue|concern|blocker)|\bharmless\b|\bcan be (?:safely )?ignored"
    r"|\b(?:non-blocking|approved (?:the )?warnings?|warnings? (?:were|was|are|is) approved)\b"
    # an aside about what the work did not touch ("One loose end from earlier, unrelated to this commit: …")
    r"|\bunrelated to (?:this|the|these|your) (?:commit|change|changes|fix|task|work|pr|request)\b"
    r"|不影响|无关紧要|可以忽略|与本次(?:修改|改动|提交|任务)无关", re.I)
# A rule, not a report: a modal before the negation ("should never appear", "must not be saved", "will not be sent").
_REQUIRED = re.compile(r"\b(?:should|must|shall|will|would|may|can)(?:\s+(?:never|not)|n[’']t)\b", re.I)
# The change prevents the problem the sentence names ("avoids semantic drift (where … but no discount exists)").
_PREVENTED = re.compile(r"\b(?:avoid(?:s|ed|ing)?|prevent(?:s|ed|ing)?|no longer)\b|避免|防止|不再", re.I)
# A test written to fail first and pass after the fix ("先失败再修复通过", "fails first, then passes"): TDD, no failure.
_RED_THEN_GREEN = re.compile(r"先失败|fail(?:s|ed|ing)? first|red[- ]then[- ]green|红(?:灯)?(?:再|后)绿")
# A reply that stops to wait for the user: it needs an input or a choice to go on ("I need to know the date
# range", "2 fields need your input … What would you like to do?", "请确认"). Whatever it claims done, the
# work is waiting on an answer the session never got. An offer of more ("Would you like me to…?") waits on
# nothing, so it is not one.
_NEEDS_INPUT = re.compile(
    r"\b(?:i|we) (?:still )?need (?:to know|to confirm with you|your|you to (?:provide|confirm|choose|tell|pick|decide))"
    r"|\bneeds? your (?:input|decision|confirmation|choice|approval)\b|\bplease (?:provide|confirm|choose|specify|pick|select)\b"
    r"|\bwhat would you like (?:to do|me to do|to use)\b|\bonce you (?:provide|confirm|choose|tell me|decide|pick)\b"
    r"|需要(?:您|你)(?:的)?(?:确认|提供|选择|决定|输入)|请(?:您|你)?(?:确认|提供|选择|告诉我)|等(?:您|你)(?:确认|回复)", re.I)
# The agent hands its work over for the user's review or validation ("Prêt pour validation ; commit recommandé",
# "Ready for your review"): its claim waits on a verdict, and none came.
_AWAITS_REVIEW = re.compile(
    r"\bready for (?:your )?(?:review|validation|approval|sign-?off)\b|\bpr[êe]te? (?:pour|à) (?:la )?(?:validation|relecture)\b"
    r"|\blist[oa] para (?:su )?(?:revisi[óo]n|validaci[óo]n)\b|\bpront[oa] para (?:sua )?(?:revis[ãa]o|valida[çc][ãa]o)\b"
    r"|请(?:您|你)?(?:审阅|审核|验收)|待(?:您|你)?(?:审阅|审核|验收)", re.I)
# The check of the work is handed to the user ("请稍等几分钟再刷新网页确认", "refresh the page to confirm it shows", "let
# me know if it works now", "如果 deploy 失败你把报错贴回来"): until the user reports back, nothing checked the claim.
_HANDS_CHECK = re.compile(
    r"\b(?:refresh|reload|hard-refresh)\b[^.\n]{0,80}\b(?:confirm|check|verify|see (?:if|whether))\b"
    r"|\blet me know (?:if|whether|how) (?:it|that|this|everything|the \w+) (?:now )?(?:works?|worked|fix(?:es|ed)|helps"
    r"|goes|still)\b|\bplease (?:test|verify|confirm|check) (?:it|that|this|whether|if)\b"
    r"|(?:刷新|重新加载|再试|测试|验证|检查)[^。！？\n]{0,30}确认|请(?:您|你)?(?:确认|验证|测试|试一下|再试)"
    r"|(?:如果|若)[^。\n]{0,30}(?:失败|报错|不行|还有问题)[^。\n]{0,20}(?:贴|发|告诉)"
    r"|確認してください|お試しください|試してみてください", re.I)
# The fix takes effect only once the user runs what the reply hands over ("### What you should run on the droplet",
# "在服务器上执行…"): until someone reports back, the claim is about code, not about the running system.
_LEAVES_STEPS = re.compile(
    r"\bwhat you (?:should|need to|must|have to) run\b|\byou (?:should|need to|must|will need to|have to) "
    r"(?:run|deploy|redeploy|rebuild|restart|pull)\b[^.\n]{0,60}\bon (?:the|your) (?:server|droplet|vps|production"
    r"|remote|host)\b|\bon (?:the|your) (?:server|droplet|vps)\b[^.\n]{0,40}\brun\b|(?:请|需要)(?:您|你)?在服务器上"
    r"|在服务器上(?:执行|运行)", re.I)
# A claim the reply itself says is unchecked: "Fixed the handler. I haven't run the tests yet.", "untested", "还没有测试".
_UNVERIFIED = re.compile(
    r"\b(?:i|we) (?:haven[’']?t|have not|did ?n[’']?t|did not) (?:yet )?(?:run|test(?:ed)?|verif(?:y|ied)|check(?:ed)?"
    r"|tr(?:y|ied)(?: it)?)\b|\b(?:untested|unverified|not (?:yet )?(?:been )?(?:tested|verified))\b"
    r"|\b(?:the )?(?:tests?|build|changes?|it) (?:weren[’']?t|wasn[’']?t|were not|was not|ha(?:ve|s)n[’']?t been"
    r"|ha(?:ve|s) not been) (?:run|tested|verified|executed|built|checked)\b"
    r"|(?:还|尚)?(?:没有|没|未)(?:运行|跑|测试|验证)", re.I)
_INSTRUCTION = re.compile(r"(?:please )?(?:do not|don[’']t|never)\b", re.I)


# --------------------------------------------------------------------------- signals


#: A command that exercises the work (runs its tests, builds it, runs it, calls it), as opposed to one that only
#: looks (``ls``, ``cat``, ``git status``): its success after the last change is the evidence a claim needs.
_CHECK = re.compile(
    r"(?:^|[\s;&|(/])(?:pytest|py\.test|tox|nox|unittest|jest|vitest|mocha|playwright|cypress|phpunit|rspec"
    r"|go (?:test|build|vet|run)|cargo (?:test|build|check|run|clippy)|(?:npm|pnpm|yarn|bun)(?: --?(?:prefix|dir|cwd|filter|workspace|C|w)[= ]\S+| --?[\w-]+(?:[= ](?:\"[^\"]*\"|'[^']*'))?)*(?: run)?(?: --?[\w-]+)* (?:test|build|lint"
    r"|check|typecheck|type-check|start|dev|e2e)(?::[\w:-]+)?|npx (?:tsc|jest|vitest|eslint|playwright|prisma)|make|cmake|ctest|mvn|mvnw|gradle"
    r"|gradlew|dotnet (?:test|build|run)|tsc|eslint|ruff|mypy|pyright|flake8|pylint|black|node|python[0-9.]*|uv run|deno"
    r"|bash|sh|\./[\w./-]+|curl|wget|http|docker(?: compose)? (?:build|run|up|exec)|kubectl (?:apply|get|rollout)"
    r"|terraform (?:plan|validate|apply)|swift (?:build|test)|xcodebuild|php|ruby|bundle exec|mix (?:test|compile)"
    r"|flutter (?:test|build|analyze)|gcc|g\+\+|clang|javac|java|systemctl (?:status|restart|start)|psql|sqlite3"
    # PowerShell runs a script by piping its text to Invoke-Expression (iex) or by ``powershell -File x.ps1``
    r"|(?i:invoke-expression|iex|(?:powershell(?:\.exe)?|pwsh(?:\.exe)?)(?:\s+-(?!file\b)\w+)*\s+-file))(?=\s|$)")
_CODE_RUN_TOOLS = frozenset({"execute_code"})
#: A one-line program handed to an interpreter (``python -c "import pandas"``, ``node -e …``): it exercises the
#: work only when its code reaches the project, by naming a file or module the session changed; an import of a
#: library, a print, a version check prove nothing about the change.
_INLINE_CODE = re.compile(r"(?:^|[\s;&|(/])(?:python[0-9.]*|py|node|deno|ruby|perl|php)(?:\s+-[A-Za-z]+)*\s+-(?:c|e|r)\b")
#: Program source: a change to it is what a check exercises (docs, configs and data are checked by reading).
_SOURCE = frozenset({"py", "ts", "tsx", "js", "jsx", "mjs", "cjs", "vue", "svelte", "go", "rs", "java", "kt", "kts",
                     "scala", "rb", "php", "cs", "fs", "cpp", "cc", "cxx", "hpp", "c", "h", "m", "mm", "swift", "dart",
                     "lua", "pl", "r", "jl", "ex", "exs", "erl", "hs", "ml", "clj", "zig", "nim", "sql", "sh", "ps1",
                     "html", "htm", "css", "scss", "sass", "less"})


_NAMED_SOURCE = re.compile(r"[\w./-]+\.(\w+)\b")


def _announced_empty_edit(text: str) -> bool:
    """An empty fence (an edit whose code the export dropped) right after words that name a source file."""
    if "```" not in text:
        return False
    for m in _EMPTY_FENCE.finditer(text):
        lead = text[max(0, m.start() - 160):m.start()].rstrip().rsplit("\n", 1)[-1]
        if any(n.group(1).lower() in _SOURCE for n in _NAMED_SOURCE.finditer(lead)):
            return True
    return False


def _unchecked_source_change(msgs: Sequence[Message]) -> bool:
    """The session changed program source (``_SOURCE``) and no check (``_CHECK``, or a code tool's run) passed after
    its last such change: a claim of success then rests on the claim alone. Docs and configs are checked by reading."""
    results = {m.tool_call_id: m for m in msgs if m.role == "tool" and m.tool_call_id}

    def changes_source(m: Message) -> bool:
        calls = [results[c.id] for c in m.tool_calls if c.id in results]
        # (a page saved to a temp folder, "curl -o /tmp/live.html", is no change to the code)
        return any(t.action != "read" and t.path.rsplit(".", 1)[-1].lower() in _SOURCE and not is_scratch(t.path)
                   for t in file_touches([m, *calls]))

    # An edit the export shows only as an empty fence (SpecStory of Cursor and Copilot: no code, no file), announced
    # by words that name a source file ("Теперь обновлю SecurityConfig.java:"), is a change to the code too.
    last = next((i for i in range(len(msgs) - 1, -1, -1)
                 if msgs[i].role == "assistant" and ((msgs[i].tool_calls and changes_source(msgs[i]))
                                                     or _announced_empty_edit(msgs[i].content))), None)
    if last is None:
        return False
    stems: set[str] | None = None
    last_stems: set[str] | None = None  # the modules the last change itself wrote
    for m in msgs[last + 1:]:
        if m.role == "user" and _approves(m.content):
            return False  # the user looked at the change and approved it
        for call in m.tool_calls if m.role == "assistant" else ():
            result = results.get(call.id) if call.id else None
            if result is None or result_failed(result):
                continue
            name = call.name.lower()
            if name in _CODE_RUN_TOOLS:
                return False
            command = (call_command(call.arguments, result) or "") if name in COMMAND_TOOLS else ""
            if _checked_commit(command, result) or (_DIAGNOSTICS.search(name) and _clean_diagnostics(result)):
                return False
            command = _MESSAGE_ARG.sub(" ", command)  # "git commit -m 'make pytest pass'" runs no pytest
            # a run of the program last changed ("npm run upload:readme" echoing "> tsx scripts/upload-readme.ts")
            ran = f"{command}\n{result.content[:2000]}" if command else ""
            runs = [run.group(1).rsplit(".", 1)[0] for run in _RUNS_A_FILE.finditer(ran)] if ran else []
            if runs:
                if last_stems is None:
                    last_stems = _changed_stems([msgs[last]], results)
                if any(stem in last_stems for stem in runs):
                    return False
            if not _CHECK.search(command):
                continue
            if _INLINE_CODE.search(command):
                if stems is None:
                    stems = _changed_stems(msgs, results)
                if not any(re.search(rf"(?<![\w-]){re.escape(stem)}(?![\w-])", command) for stem in stems):
                    continue
            return False
    return True


#: A line of a run's output that reports it failed: a traceback, an exception or error class with its message, a
#: compiler's "error:", a test runner's FAILED, npm's ERR!, git's fatal, a browser console's uncaught exception
#: ("mainApp.js:17  Uncaught (in promise) ReferenceError: auth is not defined").
_RUN_ERROR = re.compile(r"^\s*(?:\[[\d:.]+\]\s*|\d{4}-\d\d-\d\dT[\d:.]+Z?\s+)?"  # a CI log's time stamp ("[01:43:22.024] ")
                        r"(?:Traceback \(most recent call last\)|[\w.]*(?:Error|Exception)(?:\s*\[\w+\])?:\s\S"
                        r"|error(?:\[\w+\])?:\s|FAILED\b|npm ERR!|npm error\b|fatal:\s|Failed to compile\b"
                        r"|(?:\S+:\d+(?::\d+)?\s+)?Uncaught (?:\(in promise\) )?[\w.]*(?:Error|Exception)\b)", re.M)


#: A command after a shell prompt, as a user pastes a run ("C:\\app>npx tailwindcss init -p", "$ npm test",
#: "user@mac app % make").
_PROMPTED = re.compile(r"^\s*(?:[A-Za-z]:\\[^>\n]*>|(?:\([\w.-]+\)\s*)?[\w.@-]*(?:[: ][^\s$#%]*)?[$#%]\s)\s*(\S.*)$")
_FENCED_CODE = re.compile(r"```[^\n]*\n(.*?)```", re.S)


def _repeats_failed_command(msgs: Sequence[Message], final: str) -> bool:
    """The final reply hands the user, in a code block, a command the user pasted failing earlier ("npx tailwindcss
    init -p" then "npm error could not determine executable to run"): the answer repeats a step already shown not to
    work."""
    if "```" not in final:
        return False
    failed: set[str] = set()
    for m in msgs:
        if m.role != "user" or not _RUN_ERROR.search(m.content):
            continue
        lines = m.content.splitlines()
        for i, line in enumerate(lines):
            if (p := _PROMPTED.match(line)) and any(_RUN_ERROR.match(later) for later in lines[i + 1:i + 4]):
                failed.add(" ".join(p.group(1).split()))
    return bool(failed) and any(" ".join(line.split()) in failed
                                for block in _FENCED_CODE.findall(final) for line in block.splitlines())


def _pasted_failure(text: str) -> bool:
    """The user pasted a run that failed: a block of output (``split_paste``) with an error line in it."""
    pasted = split_paste(text)
    return pasted is not None and _RUN_ERROR.search(pasted[1]) is not None


def _unverified_fix(msgs: Sequence[Message]) -> int | None:
    """Index of the last run the user pasted, when it failed and the agent changed code after it (a tool's edit, or
    an edit shown as a code block in a chat export) that no later pasted run, approval or confirmation covers: the
    session's last check failed and its fix was never tried."""
    pasted = next((i for i in range(len(msgs) - 1, -1, -1)
                   if msgs[i].role == "user" and split_paste(msgs[i].content) is not None), None)
    if pasted is None or not _pasted_failure(msgs[pasted].content):
        return None
    after = msgs[pasted + 1:]
    if any(m.role == "user" and (_approves(m.content) or _CONFIRMED.search(_prose(m.content))) for m in after):
        return None
    if not (shows_edit(after) or any(t.action != "read" for t in file_touches(after))):
        return None
    # Reading the file again tries nothing, nor does the edit itself: only a call that runs something (a command, a
    # browser, a test tool) can. Nor does a command that had passed before the user's failed run: green while the
    # failure was there (unit tests that mock what broke in the browser), it cannot tell the fix worked.
    results = {m.tool_call_id: m for m in msgs if m.role == "tool" and m.tool_call_id}

    def command(c: ToolCall) -> str:
        return " ".join((call_command(c.arguments, results[c.id or ""]) or "").split())

    blind = {command(c) for m in msgs[:pasted] if m.role == "assistant" for c in m.tool_calls
             if c.name.lower() in COMMAND_TOOLS and c.id in results and not result_failed(results[c.id])}
    tried = any(command(c) not in blind if c.name.lower() in COMMAND_TOOLS
                else not _looks_only(c.name) and not _CHANGE_TOOL.search(c.name)
                for m in after if m.role == "assistant" for c in m.tool_calls if c.id in results)
    return None if tried else pasted


#: A commit's hooks (lint-staged, husky, pre-commit) that ran the project's checks: a linter or type checker by name,
#: or pre-commit's "ruff.......Passed" lines. A formatter alone (prettier) checks nothing.
_HOOK_CHECK = re.compile(r"(?<![\w-])(?:eslint|tsc|tsgo|vue-tsc|typecheck(?::[\w-]+)?|type-check|pytest|mypy|ruff|jest|vitest"
                         r"|clippy|flake8|pylint|golangci-lint|biome)(?![\w-])|\.{4,}\s*Passed\b")
#: The user approving what they saw, at the start of their message: "excelent, learn about these patterns", "完美",
#: "looks much better!". (Doubt in the message takes it back, ``_DOUBT``.)
_APPROVAL = re.compile(r"^\W*(?:excel+ent|great|perfect|awesome|amazing|beautiful|lgtm|well done|good job|nice work"
                       r"|looks (?:\w+ ){0,2}(?:good|great|better|perfect|nice)|完美|很好|太好了|非常好|好极了|不错"
                       r"|素晴らしい|完璧|perfecto|excelente|genial|ótimo|perfeito|parfait"
                       # Korean: "좋아 commit 해줘" (good, commit it) after the user looked at the new icon
                       r"|좋아요?|좋네요?|좋습니다|완벽(?:해요?|합니다)?|훌륭(?:해요?|합니다))(?![^\W\d_])", re.I)


def _approves(text: str) -> bool:
    prose = " ".join(_prose(text).split())
    return bool(_APPROVAL.match(prose)) and not _DOUBT.search(prose) and not _USER_UNHAPPY.search(prose)


#: The editor's language server on the files (Claude Code's IDE ``getDiagnostics``): a list of findings, each with its
#: severity, none an error a passing type check. (Cursor's ``read_lints`` was measured and left out: on two sessions
#: whose work was unfinished for other reasons, counting it as a check turned "unknown" into a false success.)
_DIAGNOSTICS = re.compile(r"getdiagnostics", re.I)
_DIAGNOSED_ERROR = re.compile(r"severity[\"'\s:=]*(?:error|1)\b", re.I)


def _clean_diagnostics(result: Message) -> bool:
    text = result.content
    return '"diagnostics"' in text and _DIAGNOSED_ERROR.search(text) is None


#: A commit or tag message given on the command line: words, not a command.
_MESSAGE_ARG = re.compile(r"""\s(?:-m|--message)(?:\s*|=)(?:"(?:[^"\\]|\\.)*"|'[^']*')""")
#: The line git prints for a commit it made: "[main 3070ee1] fix: …".
_COMMITTED = re.compile(r"^\[[^\]\s]+(?: \(root-commit\))? [0-9a-f]{7,}\] ", re.M)


def _checked_commit(command: str, result: Message) -> bool:
    """A ``git commit`` that was made (git printed its "[branch hash]" line) after its hooks ran the project's checks
    (``_HOOK_CHECK``, outside that line, which quotes the message): the checks passed, or there would be no commit."""
    if not re.search(r"\bgit\b[^;&|\n]*\bcommit\b", command) or re.search(r"--no-verify|\s-n\b", command):
        return False
    parsed = parse_result(result)
    output = parsed.get("output") if parsed is not None else result.content
    if not isinstance(output, str):
        return False
    made = _COMMITTED.search(output)
    return made is not None and _HOOK_CHECK.search(output, 0, made.start()) is not None


def _ends_on_passing_check(tail: Sequence[Message]) -> int | None:
    """Index in ``tail`` of the result it ends on, when that is a check (``_TEST_OR_BUILD``: tests, a build, a type
    check) that ran after the tail's last change and did not fail; else None."""
    last = next((i for i in range(len(tail) - 1, -1, -1) if tail[i].role != "system"), None)
    if last is None or tail[last].role != "tool" or result_failed(tail[last]) or not tail[last].tool_call_id:
        return None
    call = next((c for m in tail[:last] for c in m.tool_calls if c.id == tail[last].tool_call_id), None)
    if call is None or call.name.lower() not in COMMAND_TOOLS:
        return None
    command = _MESSAGE_ARG.sub(" ", call_command(call.arguments, tail[last]) or "")
    if not _TEST_OR_BUILD.search(command):
        return None
    return last if not _unchecked_source_change(list(tail)) else None


def _last_change(tail: Sequence[Message]) -> int | None:
    """Index in ``tail`` of the last assistant message whose tool calls changed a file. What a run's own output says
    it saved ("Wrote 54 prompts to prompt_history.md") is the program's output, not a change to check: that run is
    the check of the change before it."""
    results = {m.tool_call_id: m for m in tail if m.role == "tool" and m.tool_call_id}
    last_change = None
    for i, m in enumerate(tail):
        if m.role == "assistant" and m.tool_calls:
            calls = [results[c.id] for c in m.tool_calls if c.id in results]
            saved = {p.replace("\\", "/").rsplit("/", 1)[-1] for r in calls for p in saved_files(r)}
            if any(t.action != "read" and t.path.rsplit("/", 1)[-1] not in saved for t in file_touches([m, *calls])):
                last_change = i
    return last_change


def _ran_after_last_change(tail: Sequence[Message]) -> bool:
    """A command ran in a step after the tail's last change to a file, whatever it found ("rg '\\['" finding no
    placeholder left exits 1): what it found is judged as any failure is."""
    if (last := _last_change(tail)) is None:
        return False
    return any(m.role == "assistant" and any(c.name.lower() in COMMAND_TOOLS for c in m.tool_calls)
               for m in tail[last + 1:])


def _passing_check_after_change(tail: Sequence[Message], checks: re.Pattern[str] | None = None, *,
                                anywhere: bool = False) -> int | None:
    """Index in ``tail`` of a check (``checks``, by default ``_TEST_OR_BUILD``) that passed after the tail's last change
    to a file, when no tool failed after it; else None (no change, no such check, or a failure since). ``anywhere``:
    where no tool changed a file (an export that shows its edits as prose diffs), a check anywhere in the tail counts."""
    checks = checks or _TEST_OR_BUILD
    if (last_change := _last_change(tail)) is None:
        if not anywhere:
            return None
        last_change = -1
    passed = None
    for i in range(last_change + 1, len(tail)):
        m = tail[i]
        if m.role != "tool" or not m.tool_call_id:
            continue
        call = next((c for x in tail[max(last_change, 0):i] for c in x.tool_calls if c.id == m.tool_call_id), None)
        if call is None:
            continue
        if result_failed(m):
            return None  # a failure after the check (or instead of it) is left for the other rules to judge
        command = _MESSAGE_ARG.sub(" ", call_command(call.arguments, m) or "") if call.name.lower() in COMMAND_TOOLS else ""
        if checks.search(command):
            passed = i
    return passed


#: The user asks to run the thing itself ("run the model", "跑一下", "実行して"): a run that came back clean is what
#: was asked for, where a run nobody asked for proves nothing (``_TEST_OR_BUILD``).
_RUN_ASK = re.compile(r"\b(?:run|rerun|re-run|execute|launch|train)\b(?!\s+(?:out|into|over)\b)|跑|运行|執行|执行|実行|실행|"
                      r"\b(?:ejecuta|corre|lance|exécute|starte|führe)\b", re.I)


def _not_checked(final: str, reasoning: str, tail: Sequence[Message]) -> bool:
    """The final reply (or its reasoning) says the work was not run or checked (``_UNVERIFIED``). Where a test or build
    passed after the last change, a sentence about running something else ("I did not run the full pretraining jobs,
    so the next step is…", after "Verified with: unittest …") leaves that check standing; one about the tests does not."""
    said = [s for s in [*_sentences(_prose(final)), *_sentences(reasoning)] if _UNVERIFIED.search(s)]
    if not said:
        return False
    if _passing_check_after_change(tail) is None:
        return True
    return any(_CHECK_WORD.search(s) for s in said)


_CHECK_WORD = re.compile(r"\b(?:tests?|test suite|specs?|build|compiled?|type ?check|lint|linter|ci)\b|测试|编译|构建", re.I)


#: An offer of more, optional work closing a report ("Want me to spin up the dev server so you can check it?"): the
#: user not taking it up leaves nothing unanswered that the work waits on.
_OFFER = re.compile(r"^(?:(?:(?:do you )?want me to|would you like (?:me )?to|shall i|should i|do you want me to"
                    r"|if you(?:'d| would)? like|let me know if you(?:'d| would)? like)\b|(?:要不要|需要|是否需要)我|要我|是否需要|要不要"
                    r"|¿?(?:quieres|quer|voulez-vous|souhaitez-vous) que)", re.I)


# The offer is to make the change the reply proposes ("¿Quieres que implemente este cambio?", "Shall I apply these
# changes?", "要我帮你修改吗"): the reply found what to change and waits for a go-ahead that never came. That asks for an
# answer; an offer of something more ("want me to add tests too?") does not.
_PROPOSED_CHANGE = re.compile(
    r"\b(?:implement|apply|make|do)\b[^.?!\n]{0,20}\b(?:this|these|that|those|the|my|proposed|suggested) "
    r"(?:\w+ )?(?:changes?|fix(?:es)?|edits?|modifications?|updates?)\b"
    r"|\b(?:implemente|aplique|haga|hacer|aplicar|implementar)\b[^.?!\n]{0,20}\b(?:este|estos|esta|estas|el|los|la|las|"
    r"esse|essa|esses|essas|a|as|o|os) (?:cambios?|correcci[óo]n|correcciones|ajustes?|modificaci[óo]n|alterações?"
    r"|alteração|mudanças?|correções?|correção)\b"
    r"|\b(?:applique|implémente|appliquer|implémenter)\b[^.?!\n]{0,20}\b(?:ces|cette|ce|la|les) (?:modifications?"
    r"|changements?|corrections?)\b|(?:修改|应用|实现|改)(?:这个|这些|一下)?(?:修改|改动|方案)?(?:吗|么|嗎)", re.I)


def _offers_more(text: str) -> bool:
    sentences = _sentences(_prose(text))
    return bool(sentences) and _OFFER.match(sentences[-1]) is not None and not _PROPOSED_CHANGE.search(sentences[-1])


#: The checks a session may end on and be judged by: a test suite, a build, a type check. (A script or a request
#: run last is exploration as often as a check: a Hermes run ended on one while its research went on.)
_PACKAGE_SCRIPT = r"(?:npm|pnpm|yarn|bun)(?: --?[\w-]+(?:[= ]\S+)?)*(?: run)? "
#: Test runs: what checks behaviour.
_TESTS = (r"pytest|py\.test|unittest|tox|nox|jest|vitest|mocha|playwright test|phpunit|rspec|go test|cargo test"
          r"|" + _PACKAGE_SCRIPT + r"test(?::[\w:-]+)?|npx (?:jest|vitest|playwright test)|mvnw? (?:test|verify)"
          r"|gradlew? (?:test|check)|dotnet test|make (?:test|check)|ctest|swift test|flutter test")
#: Builds, type checks and linters: what checks that the code compiles.
_BUILDS = (r"go (?:build|vet)|cargo (?:build|check|clippy)|" + _PACKAGE_SCRIPT
           + r"(?:build|typecheck|type-check|lint)(?::[\w:-]+)?|npx tsc|tsc|vue-tsc|mvnw? (?:package|install)"
           r"|gradlew? build|dotnet build|make build|swift build|flutter analyze|mypy|pyright|ruff check|eslint")
_TEST_OR_BUILD = re.compile(r"(?:^|[\s;&|(/])(?:" + _TESTS + "|" + _BUILDS + r")(?=\s|$)")
#: The test runs among the checks, where a build or a type check checks only that the code compiles.
_TEST_RUN = re.compile(r"(?:^|[\s;&|(/])(?:" + _TESTS + r")(?=\s|$)")


#: A program run by its file: "python tools/sync.py", "tsx scripts/upload-readme-to-r2.ts" (npm echoes the script it
#: runs as "> tsx …"), "node dist/cli.js"; the group is the file's name.
_RUNS_A_FILE = re.compile(r"(?:^|[\s;&|>])(?:node|tsx|ts-node|deno run|bun(?: run)?|python3?|py|bash|sh|zsh|ruby|php"
                          r"|go run|pwsh(?: -File)?|powershell(?: -File)?)\s+(?:-\S+\s+)*[\"']?(?:[\w.~:\\/-]*[\\/])?"
                          r"([\w-][\w.-]*\.(?:py|js|mjs|cjs|ts|tsx|sh|rb|php|go|ps1))\b", re.M)


def _changed_stems(msgs: Sequence[Message], results: dict[str, Message]) -> set[str]:
    """The module names of the source files the session changed (``league_service`` for
    ``app/services/league_service.py``): what a one-line program must name to exercise the change."""
    stems: set[str] = set()
    for m in msgs:
        if m.role == "assistant" and m.tool_calls:
            calls = [results[c.id] for c in m.tool_calls if c.id in results]
            for t in file_touches([m, *calls]):
                name = t.path.rsplit("/", 1)[-1]
                if t.action != "read" and "." in name and name.rsplit(".", 1)[-1].lower() in _SOURCE:
                    stems.add(name.rsplit(".", 1)[0])
    return {s for s in stems if len(s) > 1}


def _tool_signal(messages: Sequence[Message]) -> tuple[bool, bool]:
    """(any tool ran, the last failure comes after the last success). A search that found nothing is no failure."""
    last_ok = last_err = -1
    calls = {c.id: c for m in messages for c in m.tool_calls if c.id}
    for i, m in enumerate(messages):
        if m.role == "tool":
            call = calls.get(m.tool_call_id or "")
            if (result_failed(m) and not (call is not None and call.name.lower() in COMMAND_TOOLS
                                          and found_nothing(call_command(call.arguments, m), m))) or (
                    call is not None and _RUN_TOOL.search(call.name) and _ends_on_error(m.content)):
                last_err = i
            else:
                last_ok = i
    return last_ok >= 0 or last_err >= 0, last_err > last_ok


def _ends_on_error(output: str) -> bool:
    """A run's output with no exit status (a SpecStory export keeps only the terminal's text) whose last line is an
    error: "Error: Job 'analyze-and-fix' failed", "npm ERR! …", a traceback's last line. How a run ends is its outcome;
    an error it printed on the way and got past is not."""
    if "xit code" in output or "xited with code" in output:
        return False  # the harness's own status says it (``result_failed``)
    lines = output[-4000:].splitlines()[1 if len(output) > 4000 else 0:]  # the end of a long output, whole lines
    last = next((ln for ln in reversed(lines) if ln.strip() and not ln.strip().startswith("```")), "")
    return _RUN_ERROR.match(last) is not None


#: One RE2 pass says no for most texts before ``_DONE`` or ``_FAILED`` scans them (both are asked of every
#: reply of every phase); a maybe still goes through the ``re`` pattern, so no answer changes.
_MAY_BE_DONE = Screen([_DONE])
_MAY_HAVE_FAILED = Screen([_FAILED])


def _says_failed(text: str) -> bool:
    """Failure wording outside conditionals: "If anything still fails, tell me" offers help, it reports nothing;
    nor does a failure the sentence only names as a condition ("falls back to Chroma when pgvector 失败时")."""
    if not _MAY_HAVE_FAILED.may_match(text) or not _FAILED.search(text):
        return False
    # What a code span quotes is the quoted text's, not the reply's: a bug table's "`Cannot read properties of
    # undefined`" names an error found (and fixed), it says nothing of the work.
    if "`" in text:
        text = _QUOTED_SPAN.sub("`…`", text)
    return any(not _IF.match(s) and not _RED_THEN_GREEN.search(s)
               and any(not _conditional(s, m) and not _LIMIT.match(s, m.end()) and not _generic_inability(s, m)
                       for m in _FAILED.finditer(s))
               for s in _sentences(text))


# "It cannot prove the source didn't stop early" states what a check is able to know, not that the work failed.
# (After the match, not a lookahead inside ``_FAILED``: the RE2 screen takes no lookaround.)
_LIMIT = re.compile(r"(?<=n[’']t|not)\s+(?:prove|guarantee|detect|distinguish|tell (?:whether|if|apart)|know whether"
                    r"|be sure|be certain)\b", re.I)


# What a kind of thing cannot do, said of any one of it: "a single linear coefficient can't represent 'high in the
# middle'", "an iframe cannot read its parent's cookies". A general statement explains; it reports no failure of the
# work, whose reports name their subject ("the build can't find", "I couldn't", "it cannot connect"). The subject
# opens its clause (a sentence, or after a dash or colon): "Done, but a test cannot connect" reports one.
_ANY_ONE = re.compile(r"(?:^|[—–:;(]\s*)[“\"']?(?:a|an|any|one)\s+(?:[\w-]+\s+){0,3}$", re.I)
# What the reader could not do before, told to explain ("in the cramped scatter you couldn't tell signal from noise"):
# the past of the generic "you"; "you still can't log in" and "you can't deploy from this branch" report.
_YOU_BEFORE = re.compile(r"\byou\s+$", re.I)


def _generic_inability(sentence: str, m: re.Match[str]) -> bool:
    word = m.group(0).lower()
    if word.startswith("could"):
        return bool(_YOU_BEFORE.search(sentence, 0, m.start()))
    return word.startswith("can") and bool(_ANY_ONE.search(sentence, 0, m.start()))


# A failure word that names a condition the work handles, not an outcome: "回退逻辑：pgvector 失败时回退到 Chroma",
# "retries if the upload cannot reach S3", "whenever the socket is unable to connect". Chinese marks the clause
# after the word (失败时, 失败的话, 失败则) or before it (如果/一旦/万一 … 失败; never 当, which is also 当前); English by a subordinator a few words
# before it, in the same clause. "When I ran it, it couldn't find X" tells of an event: only a present-tense
# failure word ("can't", "cannot", "is unable to", "doesn't work") is a condition after "when".
_COND_AFTER = re.compile(r"[^\S\n]*(?:时|的时候|时候|的话|则)")
# The clause after the subordinator: no punctuation and no conjunction that opens a new one ("I checked if the
# server was up but couldn't connect" reports a failure).
_CLAUSE = r"(?:(?!\b(?:but|and|so|then|however|though|yet)\b)[^,;:.!?，；：。！？\n]){0,60}$"
_COND_BEFORE = re.compile(r"(?:\b(?:if|whenever|in case|unless)\b|如果|若是?|假如|要是|万一|一旦)" + _CLAUSE, re.I)
_WHEN_BEFORE = re.compile(r"\bwhen\b" + _CLAUSE, re.I)
_PRESENT_FAILURE = re.compile(r"can[’']?t|cannot|unable to|doesn[’']?t work|无法|失败", re.I)


def _conditional(sentence: str, m: re.Match[str]) -> bool:
    """The failure word ``m`` sits in a condition of ``sentence`` (see ``_COND_AFTER``, ``_COND_BEFORE``)."""
    if _COND_AFTER.match(sentence, m.end()):
        return True
    lo = max(0, m.start() - 80)  # a bounded look back: linear however long the sentence
    if _COND_BEFORE.search(sentence, lo, m.start()):
        return True
    return bool(_WHEN_BEFORE.search(sentence, lo, m.start()) and _PRESENT_FAILURE.fullmatch(m.group(0)))


def _done_word(text: str) -> bool:
    return _MAY_BE_DONE.may_match(text) and _DONE.search(text) is not None


def _mentions_done(text: str) -> bool:
    """A completion word anywhere, code included, and no failure wording: the loose signal that a reply
    closed a topic (where the extractive summary cuts phases), not a claim that the work succeeded."""
    return _done_word(text) and not _says_failed(text)


def _claims_done(text: str) -> bool:
    """Some sentence states the work done: a completion word that is neither negated nor pending, in a
    sentence that is no conditional and no question, in a reply with no failure wording."""
    if not _done_word(text) or _says_failed(text):
        return False
    for s in _sentences(_prose(text)):
        # an announcement of the next step claims nothing ("Vou começar pelo Context7 para documentação actualizada")
        if _IF.match(s) or s.endswith(("?", "？")) or _NEXT_STEP.match(s):
            continue
        for m in _DONE.finditer(s):
            # the few words before the match, not the whole sentence: linear in a long one
            lo = max(0, m.start() - _LOOKBACK)
            if not _NEGATED.search(s, lo, m.start()) and not _PENDING.search(s, lo, m.start()) \
                    and not s.startswith(_WHEN_DONE, m.end()):
                return True
    return False


# A Chinese completion word that opens a time or condition clause: "提交成功后，再点 Push" (once the commit succeeds,
# click Push) tells the user what to do after a step, it does not report one.
_WHEN_DONE = ("后", "之后", "以后", "时", "的时候", "的话")


#: A report of an artifact made, in the words a generator's closing report uses ("Generated sprint-status.yaml.",
#: "Codified the governance: established the v1.0.0 constitution", "I've generated the tasks file", "Validation
#: passed"): a claim, as the report's verb, never "the generated files" as an adjective.
_MADE = re.compile(r"(?:^|\b(?:I|we)(?:['’]ve| have)?\s+|\b(?:has|have|was|were) been\s+)"
                   r"(?:generated|established|codified|written|bumped|simplified|refactored|rewr(?:ote|itten)|reworked"
                   r"|reverted|restored|switched|converted|migrated|extracted|streamlined|consolidated)\b"
                   r"|^(?:validation|checks?) passed\b", re.I)


def _claims_made(final: str, tail: Sequence[Message]) -> bool:
    """The final reply reports an artifact made (``_MADE``), and a command ran after the tail's last change to a file
    (``_ran_after_last_change``: the generator's own validation). A document written and never looked at again
    rests on the claim alone."""
    if not any(_MADE.search(s) and not _IF.match(s) and not s.endswith(("?", "？")) for s in _sentences(_prose(final))):
        return False
    return _ran_after_last_change(tail)


_QUOTED_SPAN = re.compile(r"`[^`\n]+`")


def reported_problem(text: str) -> str | None:
    """The first sentence of a reply that reports a problem still open (``_PROBLEM_REPORT``), else None: not
    a question, a conditional, a quoted instruction, nor a sentence that fixes or waves off its problem. What a code
    span quotes is the quoted text's, not the reply's ("- `Tools exist to reinforce human will. They do not exist to
    replace it.`", the copy the agent wrote)."""
    prose = _prose(text)
    for s in _sentences(_QUOTED_SPAN.sub("`…`", prose) if "`" in prose else prose):
        if _IF.match(s) or s.endswith(("?", "？")):
            continue
        if _INSTRUCTION.match(s) or _DISMISSED.search(s):
            continue
        # "if both are empty, Liked points you to the starters" describes behaviour under a condition; "tokens that
        # should never appear in form values" states a rule; "avoids drift (where the UI says discount but no
        # discount exists)" names a problem the change prevents: none reports one still open
        m = next((m for m in _PROBLEM_REPORT.finditer(s)
                  if not _conditional(s, m) and not _REQUIRED.search(s, max(0, m.start() - 20), m.start() + 8)
                  and not _PREVENTED.search(s, 0, m.start())), None)
        if m and not _FIXED_AFTER.search(s, m.end()):
            return s
    return None


def _waits_for_input(text: str) -> bool:
    """The reply ends on a question and says it needs the user's input or choice to go on (``_NEEDS_INPUT``)."""
    prose = _prose(text).rstrip().rstrip("*_ ")
    return prose.endswith(("?", "？", ":", "：", "!", "！")) and bool(_NEEDS_INPUT.search(prose)) and any(
        s.endswith(("?", "？")) for s in _sentences(prose))


#: A tool that only looks (``CronList``, ``read_file``, ``git_status``…), by the words of its name; one that also
#: names a change (``TaskUpdate``, ``get_or_create``) does not.
_LOOK_WORDS = frozenset({"list", "read", "get", "view", "show", "status", "search", "grep", "glob", "find", "ls", "cat",
                         "fetch"})
_CHANGE_WORDS = frozenset({"write", "edit", "create", "update", "delete", "set", "put", "add", "remove", "patch",
                           "apply", "run", "exec", "execute", "move", "rename"})


def _looks_only(name: str) -> bool:
    words = {w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", name)}
    return bool(words & _LOOK_WORDS) and not words & _CHANGE_WORDS


def _looked_after_saying(tail: Sequence[Message], last: Message) -> bool:
    """The tail ends on a look the last reply took along with what it said (its text and the call in one message: a
    report, then ``CronList`` to show the job now scheduled): the reply had its say, and looking changes nothing."""
    call_id = last.tool_call_id if last.role == "tool" else None
    said = next((m for m in reversed(tail) if m.role == "assistant" and m.tool_calls
                 and (call_id is None or any(c.id == call_id for c in m.tool_calls))), None)
    if said is None or len(_prose(said.content).strip()) < 80:
        return False
    sentences = _sentences(_prose(said.content))
    if said.content.rstrip().endswith((":", "：")) or (sentences and _NEXT_STEP.search(sentences[-1])):
        return False  # "Let me check the schedule:": it announced work to come
    return all(c.name.lower() not in COMMAND_TOOLS and _looks_only(c.name) for c in said.tool_calls)


def _cut_off(tail: Sequence[Message], final: str) -> bool:
    """The agent stopped mid-work: the tail ends on a tool call or result (unless the last reply had
    already reported the work done), inside a code block, mid-sentence (``_MID_SENTENCE``), or on an
    announcement of the next step ("Let me check the logs:", "让我修改 `a.py`：")."""
    # An empty assistant row (a thinking-only block, kept by some exports) says nothing: look past it.
    last = next((m for m in reversed(tail)
                 if m.role != "system" and not (m.role == "assistant" and not m.tool_calls and not m.content.strip())),
                None)
    if last is None or last.role == "tool" or (last.role == "assistant" and last.tool_calls):
        return (last is not None and not _claims_done(final) and not _looked_after_saying(tail, last)
                and not _carried_out(tail))
    text = last.content.strip()
    if sum(1 for ln in text.splitlines() if ln.lstrip().startswith("```")) % 2:
        return True  # the export ends inside a fence
    sentences = _sentences(_prose(text))
    mid = _MID_SENTENCE.search(text.splitlines()[-1].rstrip(" *_"))
    if mid and not (mid.group(1) and _PARTICLE_VERB.match(mid.group(1))):
        return True
    return text.endswith((":", "：")) or bool(sentences and _NEXT_STEP.search(sentences[-1]))


#: A tool that only keeps the agent's own list (Claude Code's ``TodoWrite``, Codex's ``update_plan``): bookkeeping,
#: not work.
_BOOKKEEPING = re.compile(r"todo|update_plan", re.I)


def _carried_out(tail: Sequence[Message]) -> bool:
    """The last reply announced a step ("Build is clean. Deploying now.") and made it in the same message: its calls all
    came back without failure, and after them the agent only updated its to-do list, with nothing on it left open. The
    announcement was kept and the list closed, so the export did not stop mid-work."""
    results = {m.tool_call_id: m for m in tail if m.role == "tool" and m.tool_call_id}
    said = next((i for i in range(len(tail) - 1, -1, -1) if tail[i].role == "assistant" and tail[i].content.strip()), None)
    if said is None or not tail[said].tool_calls:
        return False
    later = [c for m in tail[said + 1:] if m.role == "assistant" for c in m.tool_calls]
    if not later or not all(_BOOKKEEPING.search(c.name) and _list_closed(c.arguments) for c in later):
        return False  # more work after it (a search, an edit), or items still open: the run stopped there
    return all((r := results.get(c.id or "")) is not None and not result_failed(r)
               for c in (*tail[said].tool_calls, *later))


def _list_closed(args: object) -> bool:
    """A to-do update (``{"todos": [{"content", "status"}]}``, Codex's ``{"plan": [{"step", "status"}]}``) with every item
    completed."""
    items = (args.get("todos") or args.get("plan")) if isinstance(args, dict) else None
    return isinstance(items, list) and bool(items) and all(
        isinstance(i, dict) and str(i.get("status", "")).lower() in ("completed", "done", "cancelled") for i in items)


def _only_words(prose: str, words: bool, polite: str) -> bool:
    """The ask wants an answer (``_INFO_ASK``) or a text (``words``) and no work: no request for work unless the text is
    the work asked for (``polite``: the ask with a leading "please" the caller may have dropped), no "… and then fix
    it", no question about the state of the work (its answer is the work's outcome)."""
    return (bool(words or _INFO_ASK.search(prose) or _CHECK_ASK.search(prose))
            and not (_WORK_REQUEST.search(polite) and not words)
            and not _AND_WORK.search(prose) and not _STATUS_ASK.search(prose))


def _answered(ask: str, tail: Sequence[Message]) -> str | None:
    """"question", "text" or "review" when the last ask was a question or a request for information, for a text
    the reply delivers (``_TEXT_ASK``) or for a review of a plan (``_is_review``), not a problem report (a question about
    one already behind, "what was the issue?", is none) nor a request for work, and the agent answered it without
    setting out to change anything; else None."""
    prose = " ".join(_prose(ask).split())
    # "write a commit message and push": the text is only part of what was asked
    text = bool(prose) and _TEXT_ASK.search(prose) is not None and not _AND_WORK.search(prose)
    review = bool(prose) and _is_review(prose)
    if review:
        pass  # a review is asked for its findings, "potential issues" included
    elif not _only_words(prose, text, prose) or (
            _PROBLEM.search(prose) and not (_WAS_WRONG.search(prose) and not _STILL.search(prose))
            and not _CHECK_ASK.search(prose)):
        return None  # "explain the flow and then fix the handler" asks for work as well as an answer
    replies = _replies(tail)
    if not replies or _announces(replies[-1]):
        return None
    written = [t for t in file_touches(tail) if t.action != "read"]
    # The agent worked on the way to its answer (an analysis script it wrote, "let me check the departments first,
    # then build the comparison"): an answer still, if it only created files, and a run of its own came back without
    # failure after its last change and its last announcement, so the answer rests on a check.
    worked = bool(written) or any(_announces(m) for m in replies[:-1])
    if worked and (any(t.action != "created" for t in written) or not _ran_after_work(tail)):
        return None
    return "review" if review else "text" if text else "question"


def _announces(reply: Message) -> bool:
    return any(_NEXT_STEP.search(x) for x in _sentences(_prose(reply.content)))


#: A tool that runs something (a shell, a code runner), by its name: Claude Code's ``PowerShell`` on Windows, a
#: harness's ``run_command``, besides the command tools ``derive`` knows. A change tool writes or edits a file.
_RUN_TOOL = re.compile(r"shell|terminal|bash|powershell|pwsh|command|exec|run_code|execute", re.I)
_CHANGE_TOOL = re.compile(r"write|edit|patch|replace|insert|create|apply", re.I)


def _ran_after_work(tail: Sequence[Message]) -> bool:
    """A run (``_RUN_TOOL``, ``COMMAND_TOOLS``, a code tool) whose result came back and did not fail comes after the
    tail's last change call and its last announcement of work."""
    results = {m.tool_call_id: m for m in tail if m.role == "tool" and m.tool_call_id}
    last_work = -1
    for i, m in enumerate(tail):
        if m.role != "assistant":
            continue
        if any(_CHANGE_TOOL.search(c.name) and not _RUN_TOOL.search(c.name) for c in m.tool_calls) or (
                m.content.strip() and _announces(m)):
            last_work = i
    for m in tail[last_work + 1:]:
        for call in m.tool_calls if m.role == "assistant" else ():
            name = call.name.lower()
            result = results.get(call.id) if call.id else None
            if result is not None and not result_failed(result) and (
                    name in COMMAND_TOOLS or name in _CODE_RUN_TOOLS or _RUN_TOOL.search(name)):
                return True
    return False


# --------------------------------------------------------------------------- the end state


@dataclass(frozen=True)
class EndVerdict:
    """How the session ended, why, and the message that decided it (``index`` into the live messages)."""

    state: EndState
    reason: str
    index: int | None = None
    quote: str = ""
    #: An "unknown" that doubts a claim of done (nothing checked it, a problem or a failure is still open), as against
    #: one with no claim at all: a question answered after it leaves the doubt standing.
    doubted: bool = False


    @property
    def evidence(self) -> str:
        """One line for the note: the rule, then the deciding message as said."""
        return f"{self.reason} ({self.quote})" if self.quote else self.reason


def _verdict(state: EndState, reason: str, msgs: Sequence[Message] = (), index: int | None = None, *,
             doubted: bool = False) -> EndVerdict:
    quote = ""
    if index is not None and 0 <= index < len(msgs):
        m = msgs[index]
        words = " ".join((_prose(m.content) or m.content).split())
        quote = f"{m.role}: {words[:117] + '…' if len(words) > 120 else words}"
    return EndVerdict(state, reason, index, quote, doubted)


def last_phase_outcome(outcome: str, end_state: str) -> str:
    """The last phase's outcome, held to the session's end state.

    Nothing follows the last phase, so the evidence that judges it is the evidence that judges the
    session: "done" there stands only when the session is ``resolved``. Otherwise it is the
    assistant's own claim ("Remounted and started the backup… I'll report when it finishes"),
    which a note must not repeat as an outcome.
    """
    if outcome != "done" or end_state == "resolved":
        return outcome
    return {"failed": "failed", "unresolved": "partial"}.get(end_state, "unknown")


def infer_end_state(session: Session, facts: Facts | None = None) -> EndState:
    """How the session ended: failed / unresolved / resolved, or unknown when the signals are unclear."""
    return judge_end_state(session, facts).state


def judge_end_state(session: Session, facts: Facts | None = None) -> EndVerdict:
    """``infer_end_state`` with its reason and deciding message; the vetoes below win over any claim."""
    msgs = _live(session.messages)
    exported = _exports_the_chat(msgs)
    if exported is not None:
        # The last ask only saves this conversation (how many transcripts reached a repository): the work is what
        # came before it, judged as if the session had ended there.
        msgs = msgs[:exported]
    verdict = _judge(msgs)
    if verdict.state != "resolved":
        return verdict
    # Vetoes: evidence that outranks the agent's own account of its work.
    if _RUN_FAILED.search(session.end_reason or ""):
        return EndVerdict("failed", f"the run ended as {session.end_reason!r}", verdict.index, verdict.quote)
    cut = _harness_cut(msgs, verdict.index)
    if cut is not None:
        return _verdict("unresolved", "the harness cut the run short after the last reply", msgs, cut)
    if verdict.reason.startswith("the final reply reports the work done") and _chat_edit_unreported(msgs, verdict.index):
        return _verdict("unknown", "the final reply claims an edit shown in the chat that nothing ran and the user never "
                        "reported back on", msgs, verdict.index, doubted=True)
    rejected = _edit_rejected(msgs, verdict.index)
    if rejected is not None:
        return _verdict("unresolved", "the harness could not apply the edit the last reply made", msgs, rejected)
    if verdict.index is not None and msgs[verdict.index].role == "assistant":
        sentences = _sentences(_prose(msgs[verdict.index].content))
        # A handoff the user asked for ("prepare the handoff") is the deliverable, not work handed on.
        asked = next((m.content for m in reversed(msgs[:verdict.index]) if _kind(m) == "ask"), "")
        deliverable = _HANDOFF.search(asked) is not None
        # A conditional ("if anything still fails, tell me") offers help; it reports nothing left.
        left = next((i for i, s in enumerate(sentences)
                     if any(not (deliverable and _HANDOFF.fullmatch(m.group(0))) for m in _LEFT_OVER.finditer(s))
                     and not _IF.match(s) and not _NOT_OURS.search(s)), None)
        if left is not None or _open_work_section(msgs[verdict.index].content):
            return _verdict("unresolved", "the final reply lists work still left or failing", msgs, verdict.index)
    if not verdict.reason.startswith(("the user confirmed", "the user closed")) \
            and (earlier := _left_open_earlier(msgs, verdict.index)) is not None:
        return _verdict("unknown", "an earlier reply left work open (a decision handed to the user, items not done) that "
                        "no later message took up", msgs, earlier, doubted=True)
    return verdict


def _left_open_earlier(msgs: Sequence[Message], until: int | None) -> int | None:
    """Index of a reply that closed an earlier round of work with an open-work section (``_open_work_section``: "What
    needs Logan's decision:", "Offene Punkte:") when the user's next message asked for something else: the session
    moved on, and what that reply left open stays open, whatever the last round claims."""
    asks = [i for i, m in enumerate(msgs[:until]) if _kind(m) == "ask"]
    for ask in asks[1:]:
        closing = next((i for i in range(ask - 1, -1, -1) if msgs[i].role == "assistant" and msgs[i].content.strip()), None)
        items = _open_work_items(msgs[closing].content) if closing is not None else []
        # The next ask takes the open work up when it names what the items name ("approve decisions 18–21").
        named = {w.lower() for w in _WORD.findall(" ".join(items))}
        if items and len(named & {w.lower() for w in _WORD.findall(user_words(msgs[ask].content))}) < 2:
            return closing
    return None


_WORD = re.compile(r"[^\W\d_]{4,}|\d+(?:[–-]\d+)?|[\u3400-\u9fff]{2}")


#: An ask to save or export the conversation itself ("export a transcript of all of this chat", "выгрузи весь наш диалог",
#: "把对话导出"), and nothing else: the session's record, not its work.
_CHAT_EXPORT = re.compile(
    r"^(?:please |now |and |pls )*(?:export|save|dump|copy|write|put)\b[^.?!\n]{0,30}\b(?:transcript|chat|conversation"
    r"|dialog(?:ue)?|session)(?: history| log)?\b[^?!\n]{0,60}$"
    r"|^(?:сохрани|выгрузи|экспортируй|скопируй)[^.?!\n]{0,30}(?:диалог|переписк|чат)[^.?!\n]{0,40}$"
    r"|^(?:把|将)?(?:我们的|这次的|本次)?(?:对话|聊天记录|会话)(?:记录)?(?:导出|保存|复制)[^。！？\n]{0,20}$"
    r"|^(?:导出|保存)(?:我们的|这次的|本次)?(?:对话|聊天记录|会话)[^。！？\n]{0,20}$"
    r"|^(?:この)?(?:会話|チャット|対話)[^。！？\n]{0,10}(?:エクスポート|保存|書き出)[^。！？\n]{0,20}$", re.I)


def _exports_the_chat(msgs: Sequence[Message]) -> int | None:
    """Index of the last ask when it only asks to export this conversation (``_CHAT_EXPORT``) and some work came before."""
    last = next((i for i in range(len(msgs) - 1, -1, -1) if _kind(msgs[i]) == "ask"), None)
    if last is None or not any(m.role == "assistant" for m in msgs[:last]):
        return None
    ask = " ".join(_prose(user_words(msgs[last].content)).split())
    return last if _CHAT_EXPORT.match(ask) else None


#: A closing report's heading over the work it leaves open, in the languages sessions are held in ("Offene To-Dos",
#: "Pendientes", "残タスク"): the items under it are not done, whatever "Erledigt" says above them.
_OPEN_WORK_HEAD = re.compile(
    r"^[#*\s]*(?:open (?:to-?dos?|tasks|items|work)|outstanding (?:items|tasks|work)|still open|not (?:yet )?done"
    # "### Remaining" over "- Last Phase 1 task (run on physical iOS device) requires …" (a blind set)
    r"|remaining(?: (?:tasks?|items?|work|steps?|issues?|to-?dos?))?|left to do|still to do|剩余(?:工作|任务|事项)?"
    # decisions handed to the user: "What needs Logan's decision:", "Needs your approval", "Pending decisions"
    r"|(?:what )?needs? (?:your|\w+['’]s) (?:decision|approval|input)|awaiting (?:your )?(?:decision|approval)"
    r"|(?:pending|open) decisions?|decisions? (?:needed|required)"
    r"|offene (?:to-?dos?|punkte|aufgaben)|noch offen|verbleibende (?:aufgaben|punkte|schritte)|restarbeiten"
    r"|(?:tareas |trabajo )?pendientes?|queda(?:n)? por hacer|pend[eê]ncias|tarefas pendentes|itens em aberto|falta fazer"
    r"|reste à faire|points (?:ouverts|en suspens)|tâches restantes|punti aperti|attività (?:rimanenti|da fare)"
    r"|осталось сделать|открытые (?:задачи|вопросы|пункты)|нерешённые (?:задачи|вопросы)"
    r"|残タスク|残作業|未対応(?:事項)?|未完了(?:事項)?|待办(?:事项)?|遗留(?:问题|事项)|未完成(?:事项|的工作)?|남은 작업|미완료)"
    r"[*\s]*[:：]?[*\s]*$", re.I)
#: An item under it that says there is nothing ("- keine", "- none", "- 无").
_NOTHING_OPEN = re.compile(r"^[-*•\s]*(?:none|n/a|nothing|keine?s?|nichts|ninguna?|nada|nenhuma?|aucune?|rien|nessuno"
                           r"|нет|ничего|なし|特になし|无|没有|暂无|없음)[.。!]?\s*$", re.I)


def _open_work_section(text: str) -> bool:
    """``text`` has an open-work heading (``_OPEN_WORK_HEAD``) with an item under it that is not "none"."""
    return bool(_open_work_items(text))


def _open_work_items(text: str) -> list[str]:
    """The items under the first open-work heading (``_OPEN_WORK_HEAD``) of ``text``, or none when its first item says
    there is nothing ("- keine")."""
    lines = [ln.strip() for ln in text.splitlines()]
    for i, line in enumerate(lines):
        if line and _OPEN_WORK_HEAD.match(line):
            rest = list(itertools.dropwhile(lambda ln: not ln, lines[i + 1:]))
            items = list(itertools.takewhile(lambda ln: ln.startswith(_ITEM_MARKS), rest))
            return [] if not items or _NOTHING_OPEN.match(items[0]) else items
    return []


_ITEM_MARKS = ("-", "*", "•", *(f"{n}{p}" for n in range(1, 10) for p in ".)"))


#: VS Code Copilot through SpecStory shows each applied edit as an empty fence (its code is not exported).
_EMPTY_FENCE = re.compile(r"^```[^\n`]*\n\s*```[ \t]*$", re.M)


def _chat_edit_unreported(msgs: Sequence[Message], at: int | None) -> bool:
    """A chat export where nothing runs (no command at all: the user builds and reports back) that ends on a reply
    changing code (a diff, an elided Cursor edit, Copilot's empty fence): only the user's next report could say it
    works, and none came."""
    if at is None or any(c.name.lower() in COMMAND_TOOLS for m in msgs for c in m.tool_calls):
        return False
    if not any(m.role == "user" and (split_paste(m.content) is not None or _RUN_ERROR.search(m.content))
               for m in msgs[:at]):
        return False  # the user never reported a run: a chat about code, not a build loop
    last = msgs[at]
    return last.role == "assistant" and (shows_edit([last]) or bool(_EMPTY_FENCE.search(last.content)))


# What aider prints when the reply's edit blocks could not be applied: the reply's claim then describes an edit that
# is not on disk ("The LLM did not conform to the edit format.", "# 1 SEARCH/REPLACE block failed to match!",
# "SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in a.py").
_EDIT_REJECTED = re.compile(r"the llm did not conform to the edit format|search/replace blocks? failed to match"
                            r"|searchreplacenoexactmatch|failed to apply edit", re.I)


#: Steps a command takes that a user may turn down and an agent offer again: how a command takes it, and the words a
#: reply offers it with, in the replies' languages ("Shall I push?", "푸시도 할까요?", "要推送吗？").
_STEPS = (
    (re.compile(r"\bgit\b[^;&|\n]*\bpush\b"), re.compile(r"\bpush|푸시|推送|プッシュ", re.I)),
    (re.compile(r"\bgit\b[^;&|\n]*\bcommit\b"), re.compile(r"\bcommit|커밋|提交|コミット", re.I)),
    (re.compile(r"\bdeploy\b|\bvercel\b|\bfly deploy\b|\bnetlify\b"), re.compile(r"\bdeploy|배포|部署|デプロイ", re.I)),
    (re.compile(r"\b(?:npm|pnpm|yarn|cargo|twine|gem) (?:publish|upload)\b"), re.compile(r"\bpublish|배포|发布|公開", re.I)),
)


def _offers_rejected_step(msgs: Sequence[Message], final: str) -> int | None:
    """Index of a command the user turned down (Claude Code's "The user doesn't want to proceed with this tool use")
    whose step (a push, a commit, a deploy) nothing ran after, when the final reply asks whether to take that step
    ("author가 수정되었습니다. 푸시도 할까요?"): the step the user asked for is still undone, and the reply says so."""
    last = _sentences(_prose(final))
    if not last or not last[-1].rstrip().endswith(("?", "？")):
        return None
    results = {m.tool_call_id: m for m in msgs if m.role == "tool" and m.tool_call_id}
    pending: dict[int, int] = {}  # step → the index of its turned-down command
    for i, m in enumerate(msgs):
        for call in m.tool_calls if m.role == "assistant" else ():
            if call.name.lower() not in COMMAND_TOOLS or (result := results.get(call.id or "")) is None:
                continue
            command = _MESSAGE_ARG.sub(" ", call_command(call.arguments, result) or "")
            for step, (runs, _said) in enumerate(_STEPS):
                if runs.search(command):
                    if user_rejected(result):
                        pending[step] = i
                    elif not result_failed(result):
                        pending.pop(step, None)
    return next((i for step, i in pending.items() if _STEPS[step][1].search(last[-1])), None)


def _edit_rejected(msgs: Sequence[Message], after: int | None) -> int | None:
    """Index of the harness's report that an edit failed to apply after message ``after``, unless a later message
    shows an edit applied (aider's retry: "Applied edit to a.py")."""
    start = 0 if after is None else after + 1
    found = None
    for i in range(start, len(msgs)):
        m = msgs[i]
        if m.role == "user":
            continue
        if _EDIT_REJECTED.search(m.content):
            found = i
        elif found is not None and m.role == "tool" and m.content.lstrip().startswith("Applied edit to"):
            found = None
    return found


def _harness_cut(msgs: Sequence[Message], after: int | None) -> int | None:
    """Index of a harness error ("You've hit your limit", "API Error") after message ``after``."""
    start = 0 if after is None else after + 1
    return next((i for i in range(start, len(msgs)) if harness_error(msgs[i])), None)


# The user says the work works, in words of their own: "The ocr results are displayed appropriately", "好了，现在正常了",
# "OCRが成功して…結果が表示されました", "ya funciona". (A short "works now, thanks" is a closer, ``_until_closer``.)
_CONFIRMED = re.compile(
    r"\b(?:(?:it|that|this|everything|all|now it) (?:works?|worked|is working)|works (?:now|perfectly|great|fine|well)"
    r"|(?:is|are) (?:displayed|shown|working) (?:appropriately|correctly|properly|fine|now)|did the trick"
    r"|(?:problem|issue|bug|error) (?:is |was )?(?:solved|fixed|gone)"
    # "looks like it's working", "ok. i see the dashboard working well" (two blind-set sessions read as new asks)
    r"|it[’']?s (?:working|fixed|solved)|working (?:well|fine|great|perfectly|properly|correctly))\b"
    # (not a bare "好了": "done" after a step handed to the user says the user did it, not that it worked)
    r"|成功了|可以了|解决了|正常了|没问题了|生效了|修好了"
    r"|成功して|成功しました|表示されました|動きました|動いた|直りました|解決しました|うまくいきました"
    # Korean: "잘 되네요", "잘 돼", "작동합니다", "해결됐어요" (not "안 돼": it does not work)
    r"|잘 (?:돼|되네|되요|됩니다|된다|작동)|작동(?:해요|합니다|하네요|하네)|해결(?:됐|되었)"
    r"|\b(?:ya funciona|funciona (?:bien|perfecto|perfectamente)|funcionó|já funciona|funcionou|resuelto|resolvido)\b"
    # Persian "درست شد" (it's fixed), "کارت درسته" (your work is right), "مشکل حل شد"; Russian "заработало",
    # "теперь работает"; German "funktioniert jetzt", "klappt"; French "ça marche", "ça fonctionne"
    r"|درست شد|کارت درسته|مشکل حل شد|(?:الان|حالا) کار می‌?کن|"
    r"\b(?:заработало|(?:теперь|всё|все) работает|получилось|funktioniert (?:jetzt|wieder|super)|klappt"
    r"|ça (?:marche|fonctionne))\b",
    re.I)
# Doubt in the same message takes the confirmation back: "works, but the upload still fails", "好了，但是…".
_DOUBT = re.compile(r"\b(?:but|still|however|except|not|isn'?t|doesn'?t|didn'?t|again|only)\b|但是|不过|还是|仍然|只是"
                    r"|不[行能对]|没有|ない|ません|けど|\b(?:pero|todav[ií]a|mas|ainda)\b"
                    r"|(?<!\w)(?:ولی|اما|هنوز|نه|но|ещё|еще|не|aber|noch|nicht|mais|encore|pas)(?!\w)", re.I)
_WHY = re.compile(r"\b(?:why|cause|conjecture|post-?mortem|what happened|how come)\b|为什么|原因|なぜ|どうして", re.I)
# "why did it break *before*?" looks back at the fixed problem; "why does the upload fail?" reports a new one.
_STILL = re.compile(r"\b(?:still|again|anymore|keeps?)\b|还是|仍然|又|依然|まだ|また", re.I)
_BEFORE = re.compile(r"\b(?:before|earlier|in the first place|originally|previously|at first|happen(?:e)?d)\b"
                     r"|之前|以前|原来|当初|最初|前は|さっき|していた|だった", re.I)


def _asks_for_words(text: str) -> bool:
    """An ask whose deliverable is the reply itself: a question, an explanation, a text or a report; not work, not a
    new problem ("why did it break?" after the fix asks for an explanation, not a fix)."""
    prose = " ".join(_prose(text).split())
    words = bool(_TEXT_ASK.search(prose) or _REPORT_ASK.search(prose))
    polite = re.sub(r"^(?:please|pls|kindly)\b\s*|^请(?=告诉|解释|说明)", "", prose, flags=re.I)  # "Please tell me why …"
    if not prose or not _only_words(prose, words, polite):
        return False
    return _looks_back(prose) or not (_PROBLEM.search(prose) or _USER_UNHAPPY.search(prose))


#: A question about a problem in the past tense: "what was the issue with task-master?", "what went wrong?".
_WAS_WRONG = re.compile(r"\bwhat (?:was|were) (?:the |that )?(?:\w+ )?(?:issues?|problems?|causes?|bugs?|errors?)\b"
                        r"|\bwhat went wrong\b|之前(?:是)?什么问题|原来是什么问题|何が(?:問題|原因)だった", re.I)


def _looks_back(prose: str) -> bool:
    """The ask wants an account of a problem already behind ("why did it break before?", "what was the issue?"), not
    a fix of one that is still there ("why does it still fail?")."""
    return bool((_WAS_WRONG.search(prose) or (_WHY.search(prose) and _BEFORE.search(prose)))
                and not _STILL.search(prose))


def _thanks_for_unrun_change(msgs: Sequence[Message], closer: int | None, tail: Sequence[Message]) -> bool:
    """The user's closing thanks follows a change to code that nothing ran, in a last round where no command ran
    after that change at all (a push, a build, a test): thanks then is manners, not a report that it works."""
    return closer is not None and _unchecked_source_change(msgs[:closer]) and not _ran_after_last_change(tail)


def _confirmed(msgs: Sequence[Message]) -> int | None:
    """Index of the user's confirmation that the work works, when everything the user asked after it (and the rest
    of that message) asks only for words, and nothing after it failed or changed a file: the explanation, report or
    commit message that follows cannot undo what the user saw working."""
    for i in range(len(msgs) - 1, -1, -1):
        m = msgs[i]
        if _kind(m) is None:
            continue
        text = " ".join(_prose(m.content).split())
        sentences = _sentences(re.sub(r"\bnot only\b(.*?)\bbut also\b", r"\1 and", text, flags=re.I))
        # "部署成功了吗？" asks whether it works; only a statement confirms
        said = [s for s in sentences if _CONFIRMED.search(s) and not s.endswith(("?", "？"))
                and not _STATUS_ASK.search(s) and not re.search(r"[吗嗎][\s。！!]*$", s)]
        if said and not any(_DOUBT.search(s) for s in said) \
                and all(_asks_for_words(s) or _is_ack(s) for s in sentences if s not in said):
            after = msgs[i + 1:]
            _ran, unfixed = _tool_signal(after)
            if unfixed or any(t.action not in ("read", "created") for t in file_touches(after)):
                return None
            return i
        if _kind(m) == "ack" or _asks_for_words(m.content):
            continue
        return None
    return None


def _could_not_do_prior(msgs: Sequence[Message], last_ask: int) -> int | None:
    """Index of the agent's own word that it could not do what the ask before ``last_ask`` asked for
    (``_OWN_FAILURE``: "I still can't read the file", "我还没法直接读"), when no reply after it claims that work done;
    else None. A question it could not answer is no more done than work."""
    prior = next((i for i in range(last_ask - 1, -1, -1) if _kind(msgs[i]) == "ask"), None)
    if prior is None:
        return None
    said = next((i for i in range(last_ask - 1, prior, -1) if msgs[i].role == "assistant"
                 and _OWN_FAILURE.search(_prose(msgs[i].content))), None)
    if said is None or any(m.role == "assistant" and _claims_done(m.content) for m in msgs[said + 1:last_ask]):
        return None
    return said


def _problem_in_answers(msgs: Sequence[Message], prior: int, last_ask: int) -> int | None:
    """Index of a reply that reports a problem still open (``reported_problem``) among the answers to the run of
    questions that ends the session (the asks from ``prior`` back, each answered without work), not the last answer,
    whose problem words belong to what it was asked; else None."""
    asks = [i for i in range(prior + 1) if _kind(msgs[i]) == "ask"]
    run_start = prior
    for j in range(len(asks) - 1, 0, -1):  # walk back while the earlier ask was a question answered too
        if _answered(msgs[asks[j - 1]].content, msgs[asks[j - 1] + 1:asks[j]]) is None:
            break
        run_start = asks[j - 1]
    return next((i for i in range(run_start + 1, last_ask) if msgs[i].role == "assistant" and msgs[i].content.strip()
                 and reported_problem(msgs[i].content) is not None), None)


def _judge(msgs: list[Message]) -> EndVerdict:
    confirmed = _confirmed(msgs)
    if confirmed is not None and any(m.role == "assistant" for m in msgs[:confirmed]):
        return _verdict("resolved", "the user confirmed the work, and after that asked only for answers", msgs,
                        confirmed)
    last_turn = last_ask = None
    pasted_back = echoes(msgs)
    for i, m in enumerate(msgs):  # the last ask, or an ack that hands the turn back ("continue", "yes")
        kind = _kind(m) if i not in pasted_back else None
        if kind == "ask":
            last_turn = last_ask = i
        elif kind == "ack" and _ack_role(msgs, i) == "go":
            last_turn = i
    if last_turn is None:
        return EndVerdict("unknown", "the user never asked for anything")
    ask = msgs[last_ask].content if last_ask is not None else ""
    undo = next((i for i in range(last_turn + 1, len(msgs))
                 if msgs[i].role == "user" and _UNDO.match(msgs[i].content.strip())), None)
    if undo is not None:
        return _verdict("unresolved", "the user rolled the work back", msgs, undo)
    tail, closed = _until_closer(msgs[last_turn + 1:])
    replies = _replies(tail)
    final = replies[-1].content if replies else ""
    at = (last_turn + 1 + tail.index(replies[-1])) if replies else None
    closer = last_turn + 1 + len(tail) if closed else None
    _ran, unfixed = _tool_signal(tail)
    if unfixed and not _claims_done(final):
        return _verdict("failed", "a tool failed after the last success and no reply claims a fix", msgs,
                        at if at is not None else last_turn)
    if not replies:
        # A "continue" after the harness cut the run ("You're out of extra usage", then "continue
        # generating", nothing more) is still a run the harness stopped.
        cut = _harness_cut(msgs, last_turn if last_ask is None else min(last_ask, last_turn))
        if cut is not None:
            return _verdict("failed", "the run stopped on a harness error before any reply", msgs, cut)
        return _verdict("unresolved", "the last ask got no reply", msgs, last_turn)
    if not closed and (check := _ends_on_passing_check(tail)) is not None:
        # The export ends on the check itself ("PASS tests/message.pin.permission.http.test.ts"), after the last
        # change: the evidence the issue asks for, with nothing later to contradict it.
        return _verdict("resolved", "the session ends on a check that passed after the last change", msgs,
                        last_turn + 1 + check)
    if not closed and _cut_off(tail, final):
        return _verdict("unresolved", "the agent stopped mid-work", msgs, at)
    # A review's findings are about what it reviews: only the agent's own failure counts there.
    review = last_turn == last_ask and _is_review(" ".join(_prose(ask).split()))
    # The answer to "what was the issue?" names the issue: an account of the past, not a failure of the work.
    account = (last_turn == last_ask and _asks_for_words(ask) and _looks_back(" ".join(_prose(ask).split()))
               and _answered(ask, tail) == "question")
    if not account and ((_OWN_FAILURE.search(_prose(final)) is not None) if review else _says_failed(final)):
        return _verdict("failed" if unfixed else "unresolved", "the final reply says it could not be done", msgs, at)
    # What the user typed: a spec-kit or skill template around it says "WRONG" in its own examples.
    if _USER_UNHAPPY.search(user_words(ask)) and not account and not _claims_done(final):
        return _verdict("unresolved", "the last ask is a complaint the final reply does not answer with a fix",
                        msgs, last_ask)
    if _claims_done(final) or _claims_made(final, tail):
        if unfixed:
            return _verdict("unknown", "the final reply claims success but a tool failure is unfixed", msgs, at,
                            doubted=True)
        if closed and not _thanks_for_unrun_change(msgs, closer, tail):
            return _verdict("resolved", "the user closed the work", msgs, closer)
        if (turned_down := _offers_rejected_step(msgs, final)) is not None:
            return _verdict("unresolved", "the user turned down a step the final reply offers again, and it never ran",
                            msgs, turned_down)
        if _waits_for_input(final):
            return _verdict("unresolved", "the final reply claims progress but waits for the user's input, never given",
                            msgs, at)
        if reported_problem(final) is not None:
            return _verdict("unknown", "the final reply claims success but reports a problem still open", msgs, at,
                            doubted=True)
        # The reasoning behind the final reply counts against the claim, never for it ("…and mention tests weren't run",
        # glued into a Copilot reply): the agent's own account that nothing checked the work.
        if _not_checked(final, replies[-1].reasoning or "", tail):
            return _verdict("unknown", "the final reply claims the work done but says it was not checked", msgs, at,
                            doubted=True)
        # A review asked for on top of a check that passed after the last change is courtesy: the check is the evidence.
        if _AWAITS_REVIEW.search(_prose(final)) and _passing_check_after_change(tail) is None:
            return _verdict("unknown", "the final reply hands the work over for a review that never came", msgs, at,
                            doubted=True)
        if _HANDS_CHECK.search(_prose(final)) and _passing_check_after_change(tail) is None:
            return _verdict("unknown", "the final reply leaves the check of its work to the user, who never reported "
                            "back", msgs, at, doubted=True)
        if _LEAVES_STEPS.search(_prose(final)):
            return _verdict("unknown", "the final reply leaves steps for the user to run (a deploy, a server), never "
                            "reported back", msgs, at, doubted=True)
        if (last_turn == last_ask and not account and _USER_UNHAPPY.search(user_words(ask))
                and _passing_check_after_change(tail, _TEST_OR_BUILD if _RUN_ERROR.search(ask) else _TEST_RUN,
                                                anywhere=True) is None):
            # The user said the last fix did not do it ("but it does not solve the problem", "这个还是不行"): a new claim
            # needs more than the claim. Where the user described behaviour, only tests check the fix that followed: a
            # build or a type check says it compiles ("npm run build:manifest" after "the drag still doesn't snap back",
            # a blind set's false success). Where the user pasted a failed run (a build log), the same run checks it.
            return _verdict("unknown", "the user said the work did not do what was asked, and no test checked the fix "
                            "that followed", msgs, at, doubted=True)
        if _unverified_fix(msgs) is not None:
            return _verdict("unknown", "the final reply claims the work done, but the last run the user showed failed "
                            "and the change after it was never run", msgs, at, doubted=True)
        if _unchecked_source_change(msgs):
            return _verdict("unknown", "the final reply claims the work done, but nothing ran after the last change to "
                            "the code and the user did not confirm it", msgs, at, doubted=True)
        return _verdict("resolved", "the final reply reports the work done and no later message contradicts it",
                        msgs, at)
    if final.rstrip().endswith(("?", "？")) and not closed and not _offers_more(final):
        return _verdict("unresolved", "the final reply asks the user something never answered", msgs, at)
    if closed and not _thanks_for_unrun_change(msgs, closer, tail):
        return _verdict("resolved", "the user closed the work", msgs, closer)
    answer = _answered(ask, tail) if last_turn == last_ask else None
    if answer is not None and last_ask is not None and (failed_run := _unverified_fix(msgs[:last_ask])) is not None:
        # A question answered after a failed run says nothing of the fix that followed it, named file or not.
        return _verdict("unknown", "the last run the user showed failed and the change after it was never run; "
                        "the questions after it were answered", msgs, failed_run, doubted=True)
    if answer is not None and last_ask is not None and (said := _could_not_do_prior(msgs, last_ask)) is not None:
        # A question answered after the agent said it could not do the work asked before ("所以我还没法直接读
        # `CarticulateDynamicsDirver` 的实现", then "how do I change the workspace?" answered): that work is still undone.
        return _verdict("unresolved", "the agent said it could not do the work asked before; the questions after it "
                        "were answered", msgs, said)
    if answer is not None and last_ask is not None and any(t.action != "read" for t in file_touches(msgs[:last_ask])):
        # An answer says nothing of the work done before the question: "remind me which Python setup we used" after a
        # fix nothing checked leaves it in doubt, after one the reply said failed leaves it failed. The work is judged
        # as it stood when the question came, if the ask before was for work (a question answered then is judged as one
        # now), and when that judgement is against it or doubts its claim (no claim at all is neither).
        prior = next((i for i in range(last_ask - 1, -1, -1) if _kind(msgs[i]) == "ask"), None)
        if prior is not None and _answered(msgs[prior].content, msgs[prior + 1:last_ask]) is None:
            before = _judge(msgs[:last_ask])
            if before.state in ("unresolved", "failed") or before.doubted:
                return replace(before, reason=f"{before.reason}; the questions after it were answered")
        elif prior is not None and any(t.action not in ("read", "created") for t in file_touches(msgs[:prior])) \
                and (said := _problem_in_answers(msgs, prior, last_ask)) is not None:
            # Questions all along since a change to the project's files: one answer found the change broken ("il tuo
            # [slug]/page.tsx attuale non è identico a quelle correzioni… lo faccio io") and nothing fixed it after.
            # (Scripts an analysis created are no such change: its answers' problems are what the data shows.)
            return _verdict("unknown", "an answer after the work reports a problem in it still open", msgs, said)
    if answer == "question" and _CHECK_ASK.search(" ".join(_prose(ask).split())) and reported_problem(final) is not None:
        # "Check that nothing blocks" answered with what blocks: the check found the work wanting, and nothing fixed it.
        return _verdict("unknown", "the check the user asked for found a problem left open", msgs, at, doubted=True)
    if answer is not None and _repeats_failed_command(msgs, final):
        return _verdict("unknown", "the answer hands the user a command the session already showed failing", msgs, at,
                        doubted=True)
    if answer == "question":
        return _verdict("resolved", "the last ask was a question and the final reply answers it", msgs, at)
    if answer == "review":
        return _verdict("resolved", "the last ask was for a review and the final reply gives it", msgs, at)
    if answer == "text":
        return _verdict("resolved", "the last ask was for a text and the final reply gives it", msgs, at)
    if not closed and last_ask is not None and _RUN_ASK.search(_prose(ask)) and reported_problem(final) is None \
            and not _says_failed(final) and (ran := _passing_check_after_change(tail, _CHECK)) is not None:
        return _verdict("resolved", "the last ask was to run it, and the run after the last change came back clean", msgs,
                        last_turn + 1 + ran)
    if not closed and (check := _passing_check_after_change(tail)) is not None and reported_problem(final) is None:
        # The evidence the issue asks for: a test, build or type check passed after the last change, and nothing
        # after it (the final reply included) reports a problem. Its claim words or their absence add nothing.
        return _verdict("resolved", "a check passed after the last change and nothing later reports a problem", msgs,
                        last_turn + 1 + check)
    return _verdict("unknown", "no confirmation, check or claim decides it", msgs, at)
