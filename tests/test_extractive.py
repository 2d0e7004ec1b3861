"""The extractive summariser and its reusable helpers (asks, decisions, end state, open items)."""

from __future__ import annotations

import json
from typing import Any

from pipeline.facts.derive import derive_facts
from pipeline.facts.endstate import EndVerdict, infer_end_state, judge_end_state
from pipeline.facts.turns import split_paste, user_words
from pipeline.models import Chunk, Decision, Message, Session, ToolCall
from pipeline.summarize.extractive import (
    decision_candidates,
    open_items,
    summarise_extractive,
    user_asks,
)
from tests.test_facts import TRACEBACK, load_real_session


def u(text: str, rid: int | None = None, **kw: Any) -> Message:
    return Message(role="user", content=text, row_id=rid, **kw)


def a(text: str, rid: int | None = None, calls: tuple[ToolCall, ...] = ()) -> Message:
    return Message(role="assistant", content=text, row_id=rid, tool_calls=calls)


def step(cid: str, name: str, args: dict[str, Any], output: str) -> list[Message]:
    """One tool call by the assistant and its result."""
    return [a("", calls=(ToolCall(id=cid, name=name, arguments=args),)),
            Message(role="tool", tool_call_id=cid, content=output)]


def run(cid: str, command: str, output: str, code: int) -> list[Message]:
    return [
        a("", calls=(ToolCall(id=cid, name="terminal", arguments={"command": command}),)),
        Message(role="tool", tool_call_id=cid, content=json.dumps({"output": output, "exit_code": code})),
    ]


def sess(*messages: Message, **kw: Any) -> Session:
    return Session(id="s", source=kw.pop("source", "cli"), cwd=kw.pop("cwd", "/home/ana/src/proj"),
                   messages=messages, **kw)


# --------------------------------------------------------------------------- asks


def test_a_projects_slash_command_with_arguments_is_the_ask() -> None:
    """A blind set's unattended Claude Code run had one user message: "<command-name>/flow-work-story</command-name>"
    with "<command-args>docs/prd-background-jobs.json US-009</command-args>". It read as harness text, so the note said
    no one asked for anything. Claude Code's own commands (/model, /clear, /compact) still steer the harness only."""
    ran = ("<command-message>flow-work-story</command-message>\n<command-name>/flow-work-story</command-name>\n"
           "<command-args>docs/prd-background-jobs.json US-009</command-args>")
    assert user_asks([u(ran)]) == ["flow-work-story: docs/prd-background-jobs.json US-009"]
    for own in ("<command-name>/model</command-name>\n<command-args>opus</command-args>",
                "<command-name>/compact</command-name>\n<command-args>keep the API notes</command-args>",
                "<command-name>/flow-work-story</command-name>\n<command-args></command-args>"):
        assert user_asks([u(own)]) == [], own


def test_user_asks_skip_scaffolding_commands_pastes_and_acks() -> None:
    msgs = [
        u("[CONTEXT COMPACTION — REFERENCE ONLY] Earlier turns were compacted", is_carrier=True),
        u("Review the conversation above and update the skill library"),
        u("/model anthropic/claude-sonnet-4.5"),
        u("Traceback (most recent call last):\n  File \"a.py\", line 1\nValueError: bad"),
        u("getting this when I run it:\n```\nValueError: bad\n```\ncan you fix `load_config()`?"),
        u("thanks!"),
        u("ok next one"),
        u("/home/ana/src/proj/app.py crashes on start"),
        u("Add a `--dry-run` flag to `distill`. It should print the notes instead of writing them. "
          "Also it must not touch the cache. And log how many would be written."),
    ]
    assert user_asks(msgs) == [
        "getting this when I run it: can you fix `load_config()`?",
        "/home/ana/src/proj/app.py crashes on start",
        "Add a `--dry-run` flag to `distill`. It should print the notes instead of writing them. "
        "Also it must not touch the cache. And log how many would be written.",
    ]
    long = "x " * 200 + ". second sentence."
    assert len(user_asks([u(long)])[0]) <= 300


def test_a_spec_kit_command_asks_what_the_user_typed_with_it() -> None:
    """GitHub spec-kit's commands (/speckit.specify …, in Codex and Claude Code) send their English template with the
    user's words fenced under "## User Input": the words are the ask and the session's language; the template is
    neither an ask, nor the source of decisions, nor evidence of English (a Korean session was summarised in English);
    a command run with no input asks nothing of its own. A short answer ("A") is quoted, not "pasted output"."""
    def speckit(typed: str) -> Message:
        return u(f"\n## User Input\n\n```text\n{typed}\n```\n\nYou **MUST** consider the user input before proceeding."
                 "\n\n## Outline\n\nPresent your recommended option prominently at the top with clear reasoning, "
                 "instead of asking the user to choose between options.\n")
    msgs = [speckit("docs/prd.md 파일 기반으로 스펙을 만들어줘."), a("스펙을 작성했습니다."), u("A"), a("좋습니다."),
            speckit(""), a("계획을 생성 완료했습니다.")]
    assert user_asks(msgs, "ko") == ["docs/prd.md 파일 기반으로 스펙을 만들어줘.", "A"]
    s = sess(*msgs)
    facts = derive_facts(s)
    assert facts.language == "ko"
    assert summarise_extractive(s, [], facts).decisions == ()
    assert end(*msgs) == "resolved"  # "생성 완료했습니다": Korean reports the work done
    assert end(u("단축 라우트 만들어줘"), a("만들어뒀어. 검증도 했어.")) == "resolved"  # and so does casual Korean
    assert end(u("PR 的格式好像有點不固定"), a("已統一 PR 描述格式，更新了兩個 skill。")) == "resolved"  # "已統一", "更新了"
    # BMAD-METHOD's agent command sends the agent's persona file: no ask, no language evidence
    persona = u("You must fully embody this agent's persona and follow all activation instructions exactly as "
                "specified. NEVER break character until given an exit command.\n<agent-activation CRITICAL=\"TRUE\">"
                "\n1. LOAD the persona file and present the menu of commands to the user before doing anything else."
                "\n</agent-activation>")
    msgs = [persona, a("Menu: 1. CH 2. SC"), u("implémente git flow dans mon projet"), a("C'est fait.")]
    assert user_asks(msgs, "fr") == ["implémente git flow dans mon projet"]
    assert derive_facts(sess(*msgs)).language == "fr"


def test_claude_codes_plan_handoff_wrapper_is_no_word_of_the_users() -> None:
    """Leaving plan mode, Claude Code sends "Implement the following plan: <plan> If you need specific details from
    before exiting plan mode … read the full transcript at: …": English it wrote. A Spanish session's note came out in
    English (a blind set); the plan, in the conversation's language, is what was asked."""
    plan = ("Implement the following plan:\n\n# Rediseño de ITeP: de YAML a un modelo relacional\n\n## Contexto\n\n"
            "Toda la información de un proyecto vive en un archivo por proyecto, y se repite en cada ciclo.\n\n"
            "## Pasos\n\n1. Crear la base de datos con las tablas del modelo\n2. Migrar los proyectos existentes\n\n\n"
            "If you need specific details from before exiting plan mode (like exact code snippets, error messages, or "
            "content you generated), read the full transcript at: /home/l/.claude/projects/x/33acbf0b.jsonl")
    assert "plan mode" not in user_words(plan) and not user_words(plan).startswith("Implement")
    s = sess(u(plan), a("Done: the schema and the migration are in place, and the tests pass."),
             u("Actualiza el README.md para que refleje los cambios"), a("Updated README.md."))
    assert derive_facts(s).language == "es"


def test_a_codex_automation_header_is_the_harnesss_and_its_name_the_users() -> None:
    """A blind set's Chinese Codex automation run: its prompt opens with "Automation: 每日etf 动能报告 / Automation ID /
    Automation memory / Last run", and the note's goal, title and prose came out in the header's English. The job's
    name is what the user called it; the ID, memory path and run stamp are the harness's."""
    prompt = ("Automation: 每日etf 动能报告\nAutomation ID: etf\nAutomation memory: $CODEX_HOME/automations/etf/memory.md\n"
              "Last run: 2026-03-07T03:26:34.383Z (1772853994383)\n\n[$etf-report](/u/.codex/skills/etf/SKILL.md) 生成报告")
    assert user_words(prompt) == "每日etf 动能报告\n\n[$etf-report](/u/.codex/skills/etf/SKILL.md) 生成报告"
    assert user_words("Automation: nightly\nnothing else") == "Automation: nightly\nnothing else"  # no header
    s = sess(u(prompt), a("报告已生成：reports/2026-03-07.md。"))
    assert derive_facts(s).language == "zh"
    assert user_asks(list(s.messages), "zh")[0].startswith("每日etf 动能报告")


def test_a_url_or_a_path_given_as_the_answer_is_quoted_as_typed() -> None:
    """A blind set's Korean session: the user answered "which repository?" with its URL, then with a folder; each
    phase was titled "붙여넣은 출력: …" (pasted output). One URL or path is the user's answer; a pasted log is not."""
    msgs = [u("모든 프로젝트를 Git 리포지터리에 연결해줘"), a("어느 리포지터리를 쓸까요?"),
            u("https://github.com/leejunha781/Codex.git"), a("연결했습니다."), u("C:/Users/namma/.git/"), a("완료.")]
    assert user_asks(msgs, "ko")[1:] == ["https://github.com/leejunha781/Codex.git", "C:/Users/namma/.git/"]
    log = "2026-06-06 14:17:29 => 200\n2026-06-06 14:17:30 => 500\n2026-06-06 14:17:31 => 500"
    from pipeline.summarize.extractive import _trim_ask

    assert _trim_ask(log, lang="ko").startswith("붙여넣은 출력")


def test_codex_inlining_a_skill_the_user_invoked_is_no_ask() -> None:
    """Typing "$rhwp-edit …" makes Codex add the skill's SKILL.md as a user-role message ("<skill><name>…"): a blind
    set's phase listed it as an ask ("붙여넣은 출력: `<skill>`"). It is the harness's, as Hermes's inlined skills are."""
    skill = ("<skill>\n<name>rhwp-edit</name>\n<path>/w/.agents/skills/rhwp-edit/SKILL.md</path>\n---\nname: rhwp-edit\n"
             "description: Edit HWP documents with the k-skill-rhwp CLI\n---\n# rhwp-edit\n\nUse `set-cell-text`…\n</skill>")
    msgs = [u("$rhwp-edit ./보고서.hwp에 있는 내용을 SIGGRAPH 2026에 맞게 써줘"), u(skill), a("작성했습니다.")]
    assert user_asks(msgs, "ko") == ["$rhwp-edit ./보고서.hwp에 있는 내용을 SIGGRAPH 2026에 맞게 써줘"]
    assert derive_facts(sess(*msgs)).language == "ko"


def test_claude_code_loading_a_skill_asks_for_the_skill_and_is_not_the_users_language() -> None:
    """Claude Code sends a loaded skill's SKILL.md in the user's role ("Base directory for this skill: …/brainstorming"):
    a Chinese session with four of them was summarised in English (a blind set). The load asks for the skill by name,
    as a Hermes skill run does; its English is no word of the user's."""
    skill = ("Base directory for this skill: /Users/y/.claude/plugins/cache/superpowers/5.1.0/skills/brainstorming\n\n"
             "# Brainstorming Ideas Into Designs\n\n" + "Help turn ideas into fully formed designs and specs. " * 30)
    msgs = [u("继续 cocli 的 GUI 层，目标：多租户砍除和插件管理界面"), a("好的。"), u(skill), a("先问几个问题。"),
            u("使用 playwright 自行测试"), a("测试通过。")]
    assert user_asks(msgs, "zh") == ["继续 cocli 的 GUI 层，目标：多租户砍除和插件管理界面", "brainstorming",
                                     "使用 playwright 自行测试"]
    assert derive_facts(sess(*msgs)).language == "zh"


def test_a_spec_kit_prompt_file_sent_as_written_asks_for_its_command() -> None:
    """Codex sends a spec-kit prompt run with no input as its file: frontmatter ("description: Create or update the
    project constitution…"), then "## User Input" with ``$ARGUMENTS`` never substituted. A blind set's Chinese session
    read that English template as the user's ask. It asks for what the command does; the typed input, when there is
    one, is the ask; neither template is the user's language."""
    def prompt(typed: str) -> Message:
        return u("---\ndescription: Create or update the project constitution from principle inputs\n---\n\n"
                 f"## User Input\n\n```text\n{typed}\n```\n\nYou **MUST** consider the user input before proceeding "
                 "(if not empty).\n\n## Outline\n\nYou are updating the project constitution at "
                 "`.specify/memory/constitution.md`. " + "Fill every placeholder token with a concrete value. " * 20)

    msgs = [prompt("$ARGUMENTS"), a("Constitution updated to 1.1.0."), u("你的任务完成了吗"), a("是的，已完成。")]
    assert user_asks(msgs, "zh") == [
        "speckit: Create or update the project constitution from principle inputs", "你的任务完成了吗"]
    assert derive_facts(sess(*msgs)).language == "zh"
    assert user_asks([prompt("为 Win32 项目补充约束"), a("好的。")], "zh") == ["为 Win32 项目补充约束"]


def test_the_first_spec_kit_templates_ask_for_their_command_not_the_template() -> None:
    """spec-kit's first templates (September 2025) put "User input:" and ``$ARGUMENTS`` after a preamble and before
    their own English: a German session's goal was the template's "You are updating the project constitution…", and
    its English outvoted the user's German."""
    def prompt(typed: str) -> Message:
        return u("---\ndescription: Create or update the project constitution from principle inputs\n---\n\n"
                 "The user input to you can be provided directly by the agent or as a command argument - you **MUST** "
                 f"consider it before proceeding with the prompt (if not empty).\n\nUser input:\n\n{typed}\n\n"
                 "You are updating the project constitution at `.specify/memory/constitution.md`. " * 10)

    msgs = [prompt("$ARGUMENTS"), a("Constitution updated."), u("schreibe alles auf deutsch"), a("Erledigt.")]
    assert user_asks(msgs, "de") == [
        "speckit: Create or update the project constitution from principle inputs", "schreibe alles auf deutsch"]
    assert user_asks([prompt("füge Datenschutz-Prinzipien hinzu"), a("ok")], "de") == ["füge Datenschutz-Prinzipien hinzu"]


def test_a_custom_prompt_sent_with_its_placeholder_asks_what_the_user_typed_after_it() -> None:
    """A custom prompt (a Codex ``/prompts:…`` file, a Claude Code command) may arrive as its file, ``$ARGUMENTS``
    never substituted, with what the user typed appended after the template. A blind set's Italian session read the
    English template as its ask and its language: the words after the placeholder are the ask."""
    template = ("# Update the requirements and implement the changes\n\n## Steps\n1. Read the requirements and the "
                "[User Request](#users-request).\n2. Wait for approval.\n3. Implement the approved changes. " * 5 +
                "\n\n## User's Request\n\n```text\n$ARGUMENTS\n```\n")
    typed = "Rompendo la retro-compatibilità che non deve essere garantita rimuovi in ordine questi comandi: mkrepo, mkdev"
    msgs = [u(template + typed), a("Ecco la proposta."), u("proceed"), a("Fatto: rimossi i comandi.")]
    assert user_asks(msgs, "it")[0] == typed
    assert derive_facts(sess(*msgs)).language == "it"
    inline = "Apply this prompt to: $ARGUMENTS\n\nAdd a dark mode toggle to the settings page"
    assert user_asks([u(inline), a("Done.")], "en") == ["Add a dark mode toggle to the settings page"]
    # a template that only mentions the placeholder with nothing typed after it is left as it is
    assert user_asks([u("Write `$ARGUMENTS` into the file name"), a("Done.")], "en") == [
        "Write `$ARGUMENTS` into the file name"]


def test_a_hermes_skill_run_asks_what_the_user_typed_not_the_skill_text() -> None:
    """Hermes sends a skill run as the invocation notice, the whole SKILL.md and then the user's instruction; a cron
    job's prompt opens with a bracketed notice that itself holds brackets. The ask is what the user typed; a skill run
    with no instruction asks for what the skill does. The session's language is the user's, not the skill's."""
    skill = ('[IMPORTANT: The user has invoked the "weekly-digest" skill, indicating they want you to follow its '
             "instructions. The full skill content is loaded below.]\n\n---\nname: weekly-digest\n"
             "description: Summarise the week's merged pull requests\n---\n# Weekly digest\n\nRead every merged PR. "
             "Write one paragraph per repository and keep it short.\n")
    cron = ('[IMPORTANT: You are running as a scheduled cron job. DELIVERY: do NOT use send_message. SILENT: respond '
            'with exactly "[SILENT]" if there is nothing new. Never combine [SILENT] with content.]\n\n'
            "每天检查订单服务的日志，把新的报错整理成表格。")
    msgs = [u(skill + "\nThe user has provided the following instruction alongside the skill invocation: "
              "只看 payments 仓库，用中文写。"), u(skill), u(cron)]
    assert user_asks(msgs) == ["只看 payments 仓库，用中文写。", "weekly-digest: Summarise the week's merged pull requests",
                               "每天检查订单服务的日志，把新的报错整理成表格。"]
    assert derive_facts(sess(msgs[0], msgs[2])).language == "zh"


def test_an_ask_glued_to_a_url_is_the_users_words_not_pasted_output() -> None:
    """A Chinese ask typed straight after a URL, no space between: the URL ends where the CJK text starts."""
    ask = "https://example.com/viewer/submissions/oid:31283?locale=en这是查重报告，把引用都改成图片"
    assert user_asks([u(ask)], "zh") == [ask]
    # a URL alone is the user's answer or pointer, quoted as given (it is no pasted output)
    assert user_asks([u("https://example.com/build/123/log")], "zh") == ["https://example.com/build/123/log"]


# --------------------------------------------------------------------------- decisions


def test_decisions_english_with_rejected_options_and_rationale() -> None:
    msgs = [
        u("Should we use poetry instead of uv?", 1),
        a("Let's go with `uv` instead of poetry because it resolves faster. Running tests now.", 2),
        a("We chose SQLite over Postgres for the cache.", 3),
        u("no, use `httpx` rather than requests", 4),
        u("no thanks, that's all", 5),
        a("I'll read the file first.", 6),
    ]
    assert decision_candidates(msgs) == [
        Decision(choice="Let's go with `uv` instead of poetry because it resolves faster.",
                 rationale="it resolves faster.", rejected=("poetry",), evidence="msg 2"),
        Decision(choice="We chose SQLite over Postgres for the cache.", rejected=("Postgres",),
                 evidence="msg 3"),
        Decision(choice="no, use `httpx` rather than requests", rejected=("requests",), evidence="msg 4"),
    ]


def test_decisions_chinese() -> None:
    msgs = [
        a("我们决定改用 `pnpm`，而不是 npm。然后运行测试。", 10),
        u("不用 Redis，换成 SQLite 就行", 11),
        u("这个要不要用缓存？", 12),
    ]
    assert decision_candidates(msgs) == [
        Decision(choice="我们决定改用 `pnpm`，而不是 npm。", rejected=("npm",), evidence="msg 10"),
        Decision(choice="不用 Redis，换成 SQLite 就行", rejected=("Redis",), evidence="msg 11"),
    ]


# --------------------------------------------------------------------------- end state and open items


def test_end_state_resolved() -> None:
    s = sess(u("fix the failing test"), *run("1", "pytest", "FAILED x", 1), *run("2", "pytest", "3 passed", 0),
             a("Fixed the off-by-one in `parse()`. All tests pass."), u("thanks, that's all"), a("👍"))
    assert infer_end_state(s, derive_facts(s)) == "resolved"


def test_end_state_unresolved_on_unanswered_question() -> None:
    s = sess(u("fix the failing test"), a("Fixed it, tests pass."), u("why did it break in the first place?"))
    assert infer_end_state(s, derive_facts(s)) == "unresolved"
    assert open_items(s) == ["why did it break in the first place?"]


def test_end_state_failed_on_traceback() -> None:
    s = sess(u("run the app"), *run("1", "python app.py", TRACEBACK, 1))
    assert infer_end_state(s, derive_facts(s)) == "failed"
    s2 = sess(u("run the app"), *run("1", "python app.py", TRACEBACK, 1),
              a("It still fails with the ImportError; I couldn't find `emit`."))
    assert infer_end_state(s2, derive_facts(s2)) == "failed"


def test_end_state_unresolved_when_user_says_it_still_fails_or_assistant_asks() -> None:
    s = sess(u("fix it"), a("Done."), u("still broken, same error"), a("Let me look at the logs."))
    assert infer_end_state(s, derive_facts(s)) == "unresolved"
    s2 = sess(u("set up CI"), a("Which provider do you use, GitHub Actions or GitLab?"))
    assert infer_end_state(s2, derive_facts(s2)) == "unresolved"
    assert infer_end_state(sess(a("hello")), derive_facts(sess())) == "unknown"


def _tool(cid: str, name: str, **args: Any) -> list[Message]:
    return [a("", calls=(ToolCall(id=cid, name=name, arguments=args),)),
            Message(role="tool", tool_call_id=cid, content=json.dumps({"success": True}))]


def end(*messages: Message, source: str = "cli") -> str:
    s = sess(*messages, source=source)
    return infer_end_state(s, derive_facts(s))


def test_continue_and_yes_hand_the_turn_back_instead_of_closing() -> None:
    # "继续" after a failed attempt, then nothing: the work is still open (was a false success).
    assert end(u("登录失败，修一下"), a("已修复。请重启后再试。"), u("还是这样，没有改变啊"), a("让我再看看代理配置。"),
               u("继续")) == "unresolved"
    # "Yes" to a statement is still a go-ahead; a later reply that only plans more work is unfinished.
    assert end(u("upgrade to Java 21"), a("Upgrade done; want a PR?"), u("Yes"),
               a("I need to push the branch and open the PR. Alright, let’s proceed!")) == "unresolved"
    assert end(u("fix it"), a("Fixed, tests pass."), u("thanks, that's all"), a("👍")) == "resolved"
    assert end(u("fix it"), a("Fixed, tests pass."), u("looks good")) == "resolved"
    assert end(u("add tests"), a("Want me to add a CI job too?"), u("ok"), a("I'll add the workflow file now.")) \
        == "unresolved"


def test_answered_question_is_resolved_but_not_a_problem_or_a_disguised_request() -> None:
    assert end(u("split cli.py"), *_write("w", "notes/cli.py"), *run("t", "pytest -q", "12 passed", 0), a("Done."),
               u("Does `notes --help` still list every command?"), a("Yes: the registry feeds the help text.")) \
        == "resolved"
    # the answer checks nothing: a claim nothing ran on stays in doubt (b438393, on a new blind set's false success)
    assert end(u("split cli.py"), *_write("w", "notes/cli.py"), a("Done."),
               u("Does `notes --help` still list every command?"), a("Yes: the registry feeds the help text.")) \
        == "unknown"
    assert end(u("还 pushTask 有必要吗？"), a("有必要：pushTask 还负责去重和持久化。")) == "resolved"
    assert end(u("1. 請直接輸出approach summary, 2. please direct me to the session file"),
               a("Summary: four pillars.\n\nSession file: `/Users/x/.claude/projects/a.jsonl`")) == "resolved"
    # a diagnostic question is answered by a fix, not by an explanation
    assert end(u("why does the deploy fail to connect to the database?"),
               a("The firewall rule for 5432 is still pending; open it from the app host.")) == "unknown"
    # work asked for as a question, or answered by setting out to work, is not "answered"
    assert end(u("高度可以调整小一些吗，尽量不要触发浏览器滚动"), a("好的，我来调整组件的高度。"), a("```\nundefined\n```")) \
        == "unknown"
    assert end(u("could you add a test for it?"), a("Here is a test you could add: `test_x`.")) == "unknown"


def test_cut_off_sessions_are_unresolved() -> None:
    assert end(u("apply for the grant"), *_tool("t", "terminal", command="./export.sh")[:1]) == "unresolved"
    assert end(u("research the UIs"), *_tool("t", "web_search", query="midjourney ui")) == "unresolved"
    assert end(u("add the endpoint"), a("Added the `/health` route; tests pass."),
               *_tool("t", "todo_write", todos="all done")) == "resolved"  # bookkeeping after the report
    assert end(u("db config"), a("让我添加数据库配置：\n\n```properties:app.properties\nspring.datasource.url=jdbc")) \
        == "unresolved"
    assert end(u("fix it"), a("Let me check the logs:")) == "unresolved"
    assert end(u("what models exist?"), a("Opus and Sonnet. Let me know if you need more.")) == "resolved"


def test_done_claims_in_chinese_and_portuguese_and_undo() -> None:
    # A claim answering "it did not take effect" is in doubt until something checks it (was "resolved" before the
    # 2026-12-07 eighth round: the new fix is the agent's word alone, after the user said the last one failed).
    assert end(u("图标颜色没有生效"), a("我已经将所有 `<img>` 标签替换为内联的 SVG 元素。请刷新页面查看效果。")) == "unknown"
    assert end(u("把图标改成白色"), a("我已经将所有 `<img>` 标签替换为内联的 SVG 元素。")) == "resolved"
    assert end(u("图标颜色没有生效"), a("这可能是缓存的问题。")) == "unresolved"
    assert end(u("agora faça commit and push"), a("## Push Concluído com Sucesso!\n\n**Tudo resolvido!**")) == "resolved"
    assert end(u("add the endpoint"), a("Added the `/health` route. Done."), u("/undo")) == "unresolved"


def test_pushed_created_deleted_in_french_spanish_portuguese_and_german_claim_the_work() -> None:
    """A new set's French Claude Code session: "Branche **`alexandre`** poussée sur le remote ✅" after the push's own
    output went unread as a claim (the English "pushed" is one); so did "créée", "eliminado", "criado", "gelöscht"."""
    assert end(u("pousse ma branche"), a("Branche **`alexandre`** poussée sur le remote et liée à `origin/alexandre`. ✅")) \
        == "resolved"
    assert end(u("crée le fichier de config"), a("Le fichier `config.yml` est créé.")) == "resolved"
    assert end(u("borra el script viejo"), a("Script `old.sh` eliminado.")) == "resolved"
    assert end(u("crie o arquivo"), a("Arquivo `a.md` criado com o conteúdo pedido.")) == "resolved"
    assert end(u("lösche die alte Datei"), a("Die Datei `alt.txt` wurde gelöscht.")) == "resolved"
    assert end(u("pousse ma branche"), a("La branche n'a pas été poussée : le remote refuse.")) != "resolved"


def test_a_problem_word_inside_quoted_copy_reports_nothing() -> None:
    """A new set's Cursor session rewrote a site's copy and closed "✅ 修正しました … 英文は以下にしました。 - `Tools exist to
    reinforce human will. They do not exist to replace it.`", after its build passed: the copy's "do not exist" was
    read as the reply reporting a problem. A code span quotes; a problem the reply states outside one still counts."""
    from pipeline.facts.endstate import reported_problem

    assert reported_problem("英文は以下にしました。\n- `Tools exist to reinforce human will. They do not exist to "
                            "replace it.`") is None
    assert reported_problem("Updated the copy, but the `hero` section is still not present on the page.") is not None


def test_a_page_changed_and_never_opened_rests_on_the_claim() -> None:
    """A new set's Cursor session ended on "## 已删除你标的 3 处 … 已移除" after one edit to index.html, with nothing run
    and no word from the user. A web page's HTML and CSS are what the browser runs, as a script is: a claim about a
    change to them needs a check (a build, a fetch of the page) or the user's word. A page saved to a temp folder by
    that fetch ("curl -o /tmp/live.html") is no change to the code."""
    ask = u("把这三个地方直接去掉")
    edit = step("e", "Edit", {"file_path": "index.html", "old_string": "<a>下载</a>", "new_string": ""},
                "The file index.html has been updated successfully.")
    claim = a("## 已删除你标的 3 处\n\n- **顶部导航“下载”**：已移除")
    v = _verdict(ask, *edit, claim)
    assert v.state == "unknown" and v.doubted, v
    fetched = step("f", "Bash", {"command": "curl -s -o /tmp/live.html -w '%{http_code}' http://localhost:8080/"}, "200")
    assert _verdict(ask, *edit, *fetched, claim).state == "resolved"
    css = step("c", "Edit", {"file_path": "styles/site.css", "old_string": "a", "new_string": "b"}, "updated")
    assert _verdict(ask, *css, claim).state == "unknown"


def test_a_loose_end_the_reply_says_is_unrelated_to_the_work_is_no_open_problem() -> None:
    """A new set's Claude Code session ended "Committed as `166d8ac`, working tree clean. … One loose end from earlier,
    unrelated to this commit: `entsoe-py` is installed but nothing in the repo records that dependency." An aside
    about what the work did not touch leaves the work's claim standing; a problem in the work still counts."""
    from pipeline.facts.endstate import reported_problem

    aside = ("Committed as `166d8ac`, working tree clean. One loose end from earlier, unrelated to this commit: "
             "`entsoe-py` is now installed but nothing in the repo records that dependency.")
    assert reported_problem(aside) is None
    assert reported_problem("Committed as `166d8ac`. The cache file is still not saved after a range run.") is not None


def test_an_answer_that_repeats_the_command_the_user_showed_failing_is_in_doubt() -> None:
    """A new set's Copilot (ask mode) session: the user pasted "C:\\app>npx tailwindcss init -p" then "npm error could
    not determine executable to run"; asked later "how to install the tailwind?", the answer told them to run
    `npx tailwindcss init -p` again. Answering with a step the session already showed failing is no answer that
    resolves it; an answer with other steps is."""
    paste = u("can you help me with:\n\nC:\\Users\\A\\app>npx tailwindcss init -p\n"
              "npm error could not determine executable to run\nnpm error A complete log of this run can be found in: x.log")
    first = a("Tailwind is not installed yet. Run `npm install -D tailwindcss`, then init again.")
    ask = u("how to install the tailwind?")
    again = a("1. **Install:**\n```sh\nnpm install -D tailwindcss postcss autoprefixer\n```\n\n2. **Init:**\n```sh\n"
              "npx tailwindcss init -p\n```")
    v = _verdict(paste, first, ask, again)
    assert v.state == "unknown" and "already showed failing" in v.reason, v
    other = a("Tailwind 4 has no init step:\n```sh\nnpm install -D tailwindcss @tailwindcss/postcss\n```")
    assert _verdict(paste, first, ask, other).state == "resolved"


def test_message_kinds_are_computed_in_linear_time(monkeypatch: Any) -> None:
    import pipeline.facts.endstate
    import pipeline.facts.turns
    import pipeline.summarize.extractive

    calls = 0
    real = pipeline.facts.turns._kind

    def counting(m: Message) -> str | None:
        nonlocal calls
        calls += 1
        return real(m)

    for module in (pipeline.facts.turns, pipeline.facts.endstate, pipeline.summarize.extractive):  # each binds its own name
        monkeypatch.setattr(module, "_kind", counting)
    turns = [m for i in range(400) for m in (u(f"step {i}: rename `f{i}` please"), a(f"Renamed `f{i}`. Done."),
                                             u("ok"))]
    s = sess(*turns)
    summarise_extractive(s, [], derive_facts(s))
    assert calls <= 12 * len(turns)  # a few passes per message, never one per earlier message


def test_open_items_from_next_steps_english_and_chinese() -> None:
    s = sess(u("migrate the db"), a("Migrated the schema.\n\nNext steps:\n- backfill `users.email`\n- drop the old table\n\nBye."))
    assert open_items(s) == ["backfill `users.email`", "drop the old table"]
    zh = sess(u("迁移数据库"), a("已完成迁移。\n\n下一步：\n1. 回填 `users.email`\n2. 删除旧表"))
    assert open_items(zh) == ["回填 `users.email`", "删除旧表"]


# --------------------------------------------------------------------------- whole summaries


def _write(cid: str, path: str) -> list[Message]:
    return [
        a("", calls=(ToolCall(id=cid, name="write_file", arguments={"path": path, "content": "x"}),)),
        Message(role="tool", tool_call_id=cid, content=json.dumps({"success": True, "path": path})),
    ]


def test_summary_phases_follow_generations_and_topics() -> None:
    gen0 = (u("add a `/health` endpoint to `server.ts`", 1), *_write("w1", "src/server.ts"),
            a("I added the `/health` route in `src/server.ts`. Done.", 4),
            u("now write the Dockerfile", 5), *_write("w2", "Dockerfile"), a("Created the Dockerfile.", 8))
    carrier = u("[CONTEXT COMPACTION — REFERENCE ONLY] ...", 9, is_carrier=True)
    gen1 = (carrier, u("deploy it with `docker compose up -d`", 10),
            *run("d", "docker compose up -d", "Error: port 8080 is already allocated", 1))
    s = sess(*gen0, *gen1, source="telegram")
    chunks = [Chunk(session_id="s", generation=0, messages=gen0[:4]), Chunk(session_id="s", generation=0, part=1,
              messages=gen0[4:]), Chunk(session_id="s", generation=1, messages=gen1)]
    out = summarise_extractive(s, chunks, derive_facts(s, chunks))
    assert out.goal == "add a `/health` endpoint to `server.ts`"
    assert out.title == "Add a `/health` endpoint to `server.ts`"
    assert [(p.title, p.generation, p.outcome) for p in out.phases] == [
        ("Add a `/health` endpoint to `server.ts`", 0, "done"),
        ("Now write the Dockerfile", 0, "done"),
        ("Deploy it with `docker compose up -d`", 1, "failed"),
    ]
    assert out.phases[0].done == "I added the `/health` route in `src/server.ts`. Files changed: src/server.ts."
    assert out.output_files == ("src/server.ts", "Dockerfile")
    assert out.end_state == "failed"
    assert out.tags == ("telegram", "typescript", "docker")
    assert out.projects == ("proj",)
    assert (out.summarizer, out.cost_usd, out.language) == ("extractive", 0.0, "en")


def test_a_thank_you_that_says_it_worked_closes_the_work_instead_of_opening_a_phase() -> None:
    # From the real v22 database: the user's "worked, thanks!!" used to become phase 2, outcome unknown.
    s = sess(u("what's this error on my router admin page? it started after the firmware update", 1),
             a("That's Chrome rejecting the router's new self-signed certificate. Regenerate it under "
               "System → Certificates, then reload.", 2),
             u("worked, thanks!!", 3), a("Great 🎉", 4))
    out = summarise_extractive(s, [], derive_facts(s))
    assert [(p.title, p.outcome) for p in out.phases] == [("What's this error on my router admin page?", "done")]
    assert out.end_state == "resolved"
    assert end(u("登录失败，修一下"), a("已修复。请重启后再试。"), u("可以了，谢谢")) == "resolved"
    # An ask sent twice (a retry after no answer) is listed once.
    s = sess(u("Verify this PDF.", 1), u("Verify this PDF.", 2), a("The PDF has 3 pages and 12 fields.", 3))
    assert [p.asks for p in summarise_extractive(s, [], derive_facts(s)).phases] == [("Verify this PDF.",)]


def test_phase_titles_skip_list_markers_markup_and_abbreviation_stubs() -> None:
    # Seen on real transcripts: a pasted numbered list titled its phase "1", "4" or "C".
    asks = ["1. **Update the Model Name in `call_llm()`**\n2. **Update the `_call_openai()` Function**",
            "C. 接口数据（最精确，可选） F12 → Network 标签 这里然后怎么操作",
            "e.g. use uv for the lockfile. Then run the tests.", "no, leave the version alone. we're done for today"]
    s = sess(*(m for i, ask in enumerate(asks) for m in (u(ask, 2 * i + 1), a("Done, the change is in.", 2 * i + 2))))
    titles = [p.title for p in summarise_extractive(s, [], derive_facts(s)).phases]
    assert titles == ["Update the Model Name in `call_llm()`", "接口数据（最精确，可选） F12 → Network 标签 这里然后怎么操作",
                      "e.g. use uv for the lockfile", "No, leave the version alone"], titles


def test_a_phase_whose_asks_only_point_at_a_screenshot_is_titled_by_what_it_worked_on() -> None:
    """A user walking through a console sends "这样了" / "是这样吗" with a screenshot: the title is the first ask
    that names something, else the reply's heading; a short ask that names an action ("Rerun it") stays."""
    s = sess(u("这样是对的吧", 1), a("差不多，再往下拉", 2), u("这样了，数据库账号和密码这个要怎么看", 3), a("在账号管理里看。", 4))
    assert [p.title for p in summarise_extractive(s, [], derive_facts(s)).phases] == ["这样了，数据库账号和密码这个要怎么看"]
    s = sess(u("这样了", 1), a("## 第 3 步：创建 RDS 数据库账号\n\n点左边的账号管理。", 2))
    assert [p.title for p in summarise_extractive(s, [], derive_facts(s)).phases] == ["第 3 步：创建 RDS 数据库账号"]
    s = sess(u("like this?", 1), a("Yes, exactly.", 2))
    assert [p.title for p in summarise_extractive(s, [], derive_facts(s)).phases] == ["Like this?"]
    s = sess(u("Rerun it", 1), a("## Results\n\nAll 12 tests pass.", 2))
    assert [p.title for p in summarise_extractive(s, [], derive_facts(s)).phases] == ["Rerun it"]


def test_phase_outcome_text_skips_headings_and_bold_marks() -> None:
    # From a real Copilot session: the outcome read "\\### **The Complete Picture**".
    for reply, done in [("### **The Complete Picture**\n\nGraviton runs the workers; Spot keeps costs down.",
                         "Graviton runs the workers; Spot keeps costs down."),
                        ("## 🎉 **COMPLETE! I've created a **production-ready** Terraform module.",
                         "I've created a production-ready Terraform module."),
                        ("### Summary", "Summary")]:
        s = sess(u("explain graviton", 1), a(reply, 2))
        assert summarise_extractive(s, [], derive_facts(s)).phases[0].done == done


def test_summary_decisions_drop_offers_guesses_and_lead_ins_that_choose_nothing() -> None:
    # Each of these was a "key decision" of a real transcript before; the LLM still sees them as hints.
    s = sess(u("build the report", 1), a(
        "Or tell me if you'd like me to show you the available database columns to choose from. "
        "Maybe I can try using one of those instead. Karpenter can choose between Graviton and x86 based on:\n"
        "| 包含货物 | 下拉 | 请选择货物种类 |\n"
        "We chose SQLite over Postgres for the cache because it needs no server.\n"
        "We went with polling instead of webhooks, because the proxy might drop them.\n"
        "- **Weight** determines preference (Graviton preferred over x86)", 2),
        u("现在修改 price 列，改用 tooltip：", 3), a("好的，我已改用 tooltip。", 4))
    chosen = [d.choice for d in summarise_extractive(s, [], derive_facts(s)).decisions]
    assert chosen == ["We chose SQLite over Postgres for the cache because it needs no server.",
                      "We went with polling instead of webhooks, because the proxy might drop them.",
                      "Weight determines preference (Graviton preferred over x86)",
                      "现在修改 price 列，改用 tooltip：", "好的，我已改用 tooltip。"], chosen
    assert len(decision_candidates(s.messages)) == 9  # the candidates themselves are unchanged


def test_a_substitution_the_session_made_is_a_decision_but_an_instruction_is_not() -> None:
    """Class seen on a held-out Claude Code session: "**Chat panel** — Replaced the stock `<Chat>` widget with a
    panel on `useChat`" chose the new over the old, and no decision listed it. A substitution reported in the past
    tense (after a label too), in the first person or "by replacing" is a choice; "Replace X with Y" tells the user
    what to do, and a replacement described ("the bundler replaces imports with stubs") chooses nothing. The
    LLM's candidate hints (recorded prompts) are unchanged."""
    s = sess(u("the chat looks odd", 1), a(
        "**Chat panel** — Replaced the stock `<Chat>` widget with a custom panel built on the `useChat` hook.\n"
        "I'll fix the tile by replacing the bare `<video>` with a placeholder card.\n"
        "Replace `<YOUR_KEY>` with the key from your dashboard.\n"
        "The bundler replaces dynamic imports with stubs in tests.", 2))
    chosen = [d.choice for d in summarise_extractive(s, [], derive_facts(s)).decisions]
    assert chosen == [
        "Chat panel — Replaced the stock `<Chat>` widget with a custom panel built on the `useChat` hook.",
        "I'll fix the tile by replacing the bare `<video>` with a placeholder card."], chosen
    assert decision_candidates(s.messages) == []


def test_chinese_summary_uses_chinese_labels_but_keeps_user_text() -> None:
    # (the test run after the write is the evidence for "全部通过": without it the claim alone is "unknown")
    s = sess(u("帮我给 `parser.py` 加一个单元测试", 1), *_write("w", "tests/test_parser.py"),
             *run("t", "pytest tests/test_parser.py", "1 passed", 0),
             a("我已添加测试 `tests/test_parser.py`，全部通过。", 4), cwd="/home/ana")
    out = summarise_extractive(s, [], derive_facts(s))
    assert out.language == "zh"
    assert out.goal == "帮我给 `parser.py` 加一个单元测试"
    assert out.phases[0].done == ("我已添加测试 `tests/test_parser.py`，全部通过。 改动文件：tests/test_parser.py。"
                                  " 执行：`pytest tests/test_parser.py`。")
    assert out.phases[0].outcome == "done"
    assert out.end_state == "resolved"
    assert out.projects == ()  # the home directory is not a project
    assert out.tags == ("cli", "python", "pytest")


def test_real_hermes_session_summary() -> None:
    s = load_real_session("20261120_080000_f2a74d")
    out = summarise_extractive(s, [], derive_facts(s))
    assert out.title == "Fix parser string unescaping"
    assert out.goal.startswith("the parser tests started failing after I merged the lexer change.")
    assert [(p.title, p.outcome) for p in out.phases] == [
        ("The parser tests started failing after I merged the lexer change", "done"),
        ("Add a regression test for the empty string and commit on the branch", "done"),
    ]
    assert out.decisions == (Decision(choice="I'll use `lexer.unescape` instead.", evidence="msg 7"),)
    assert out.output_files == ("src/parsekit/parser.py", "tests/test_parser_regressions.py")
    assert out.end_state == "resolved"
    assert out.open_items == ()
    assert out.tags == ("cli", "python", "git", "pytest", "uv")
    assert out.projects == ("parsekit",)


def test_a_pasted_log_ask_becomes_a_labelled_excerpt() -> None:
    """A user turn that is only pasted terminal output: the command and first error, labelled in the
    session's language, instead of 300 characters of log quoted as the ask."""
    paste = ("C:\\Users\\ana\\Desktop\\proj>mvn clean install\n[INFO] Scanning for projects...\n"
             "[ERROR] Child module C:\\Users\\ana\\Desktop\\proj\\web of C:\\Users\\ana\\Desktop\\proj\\pom.xml does not exist\n"
             "[INFO] BUILD FAILURE\n")
    msgs = [Message(role="user", content=paste), Message(role="assistant", content="我看到问题了，删除了不存在的模块。")]
    assert user_asks(msgs, "zh") == [
        "粘贴的输出：`mvn clean install` … `[ERROR] Child module C:\\Users\\ana\\Desktop\\proj\\web of "
        "C:\\Users\\ana\\Desktop\\proj\\pom.xml does not exi`…"]
    assert user_asks(msgs, "en")[0].startswith("Pasted output: `mvn clean install` … `[ERROR] Child module")
    assert user_asks(msgs) == [user_asks(msgs)[0]] and "Pasted" not in user_asks(msgs)[0]  # no lang: verbatim
    typed = [Message(role="user", content="为什么构建失败？\n" + paste)]
    # typed words around the paste are the ask; the paste is labelled (issue 15: not 300 characters of log)
    assert user_asks(typed, "zh") == [
        "为什么构建失败？ 粘贴的输出：`mvn clean install` … `[ERROR] Child module C:\\Users\\ana\\Desktop\\proj\\web of "
        "C:\\Users\\ana\\Desktop\\proj\\pom.xml does not exi`…"]


def test_typed_words_around_a_pasted_block_are_the_ask() -> None:
    """An English ask that wraps a pasted file or terminal session ("the content follows:") quotes what the user typed,
    before and after, and labels the paste: a Japanese .env comment or a container log is not what was asked (it read
    as the note's language too)."""
    env = ("My backend/.env file content follows. Please check it.\n\n# バックエンド環境変数テンプレート\n"
           "# このファイルをコピーして .env ファイルを作成してください\nOPENAI_API_KEY=[REDACTED]\nMOCK_OCR=1\n\n"
           "# サーバー設定\nPORT=8080\nNODE_ENV=development")
    assert user_asks([Message(role="user", content=env)], "en") == [
        "My backend/.env file content follows. Please check it. Pasted output: `# バックエンド環境変数テンプレート`"]
    log = ("I isolated OpenAI as the culprit and the result follows:\n"
           "PS C:\\app\\backend> docker-compose restart backend\n[+] Restarting 1/1\n"
           "backend  | > nodemon --exec ts-node src/index.ts\nbackend  | [nodemon] 3.1.10\n\nWhy does it still time out?")
    assert user_asks([Message(role="user", content=log)], "en") == [
        "I isolated OpenAI as the culprit and the result follows: Why does it still time out? "
        "Pasted output: `PS C:\\app\\backend> docker-compose restart backend`"]
    # A snippet typed into the ask, a typed list of requests: the ask as written.
    snippet = "Implement try catch finally in Program.cs with finally\n{\n  NLog.LogManager.Shutdown();\n}"
    assert user_asks([Message(role="user", content=snippet)], "en") == [
        "Implement try catch finally in Program.cs with finally NLog.LogManager.Shutdown();"]
    todo = "Please do the following:\n1. Add a dark mode toggle\n2. Fix the login redirect\n- Update the README badges"
    assert "Pasted" not in user_asks([Message(role="user", content=todo)], "en")[0]


# --------------------------------------------------------------------------- end state: evidence and vetoes


def _verdict(*messages: Message, **kw: Any) -> EndVerdict:

    s = sess(*messages, **kw)
    return judge_end_state(s, derive_facts(s))


def test_a_harness_error_is_not_a_reply() -> None:
    """A usage limit answering the last ask leaves it unanswered: never "resolved"."""
    v = _verdict(u("does the quote cover the regression matrix?"), a("You've hit your limit · resets 5pm"))
    assert v.state == "failed" and "harness" in v.reason and "hit your limit" in v.quote
    v = _verdict(u("add tests for it"), a("Done: added tests, all pass."), u("what about the refund path?"),
                 a("API Error: 529 {\"type\":\"overloaded_error\"}"))
    assert v.state == "failed"


def test_other_harness_wordings_are_errors_not_replies() -> None:
    """Claude Code's usage, plan and access messages, as real transcripts carry them."""
    for line in ("You're out of extra usage · resets May 4, 3am (Asia/Jakarta)",
                 "You've hit your weekly limit · resets Aug 16 at 1am (Asia/Tokyo)",
                 "You've hit your 5-hour limit · resets 3pm",
                 "Your organization does not have access to Claude. Please login again or contact your administrator."):
        v = _verdict(u("add the export button"), a(line))
        assert v.state == "failed" and "harness" in v.reason, line


def test_an_empty_reply_after_a_tool_result_is_still_mid_work() -> None:
    """A thinking-only assistant row at the end says nothing: the run stopped after the tool ran."""
    call = a("First I'll set up the telemetry.", calls=(ToolCall(id="c1", name="Bash", arguments={"command": "echo hi"}),))
    v = _verdict(u("help me apply for the grant"), call, Message(role="tool", tool_call_id="c1", content="hi"), a(""))
    assert v.state == "unresolved" and "mid-work" in v.reason


def test_a_reply_cut_mid_sentence_is_not_an_answer() -> None:
    """Class seen on an unseen SpecStory export: the guide the user asked for three times stops at
    "Using the new `defineNuxtConfig` function in", and the note said resolved."""
    guide = ("# Upgrading from Nuxt 2 to Nuxt 3\n\nUpgrading involves several steps. Run `npm install`. Done.\n\n"
             "## Step 5: Update Code\n\n- Replacing `context` with `useNuxtApp`\n")
    for tail in ("- Using the new `defineNuxtConfig` function in", "Then update the", "先安装依赖，"):
        v = _verdict(u("Please output the entire upgrade answer in markdown format."), a(guide + tail))
        assert v.state == "unresolved" and "mid-work" in v.reason, tail
    # a sentence may end on a particle, and a whole reply is still an answer
    for tail in ("- Updated the config and logged in", "Fixed: the flag is now turned on", "- Done, tests pass."):
        assert _verdict(u("fix the login flag"), a(guide + tail)).state == "resolved", tail


def test_an_interrupt_after_the_claim_vetoes_success() -> None:
    v = _verdict(u("fix the lint errors"), a("Fixed them all, lint passes."), u("[Request interrupted by user]"))
    assert v.state == "unresolved" and "cut the run short" in v.reason


def test_a_run_the_harness_marked_failed_is_not_resolved() -> None:
    v = _verdict(u("propose two topics"), a("Done: here are two topics."), end_reason="failed")
    assert v.state == "failed" and "'failed'" in v.reason
    # Hermes's ordinary closes are not failures
    assert _verdict(u("propose two topics"), a("Done: here are two topics."), end_reason="idle_timeout").state == "resolved"


def test_a_closing_report_with_work_left_is_not_resolved() -> None:
    v = _verdict(u("finish task 027"), a("Done with the handoff and pushed. Remaining work: session.test.ts."))
    assert v.state == "unresolved" and "left" in v.reason
    v = _verdict(u("完成剩下的工作"), a("已完成大部分修改，仍有2个测试失败。"))
    assert v.state == "unresolved"
    # an offer of help is not work left over
    assert _verdict(u("fix it"), a("已修复。如果还有任何问题，请告诉我。")).state == "resolved"
    assert _verdict(u("fix it"), a("Fixed. If anything is still failing, tell me.")).state == "resolved"


def test_a_closing_report_with_an_open_work_heading_in_any_language_is_not_resolved() -> None:
    """A German closing report said "Erledigt." and then listed under "Offene To-Dos" the date still to fill in: read as
    resolved, a false success on a blind set. A heading over open work, in the languages sessions are held in, with an
    item under it that is not "none", is work left."""
    report = "Erledigt. Die Verfassung ist übersetzt.\n\nOffene To-Dos\n- constitution.md: TODO(RATIFICATION_DATE) nachtragen."
    assert _verdict(u("schreibe alles auf deutsch"), a(report)).state == "unresolved"
    # ("### Remaining" over the device run still to do: a blind set's "Phase 1 is complete" read as resolved)
    for head in ("**Pendientes:**", "## Open items", "残タスク", "Осталось сделать:", "待办事项：", "### Remaining",
                 "**Remaining tasks**", "剩余工作："):
        assert _verdict(u("do it"), a(f"Done, all updated.\n\n{head}\n- wire the new route")).state == "unresolved", head
    for nothing in ("- keine", "- none", "- 无"):
        assert _verdict(u("do it"), a(f"Done, all updated.\n\nOpen items:\n{nothing}")).state == "resolved", nothing


def test_a_last_ask_to_export_the_chat_leaves_the_work_to_be_judged_by_what_came_before() -> None:
    """A session that ends on "export a transcript of all of this chat" (how many transcripts reach a repository)
    ended 'unresolved: the agent stopped mid-work' while it wrote the export. The ask saves the session's record, it
    asks for no work: the work is judged as if the session had ended before it. Any other last ask still counts."""
    work = [u("deploy the donation page"), a("The live deployment works end-to-end: the donation was created.")]
    export = [u("export a transcript all of this chat"), a("", calls=(ToolCall(id="t", name="Bash", arguments={
        "command": "cp /tmp/export/TRANSCRIPT.md ./TRANSCRIPT.md"}),)), Message(role="tool", tool_call_id="t", content="")]
    assert _verdict(*work, *export).state == "resolved"
    for other in ("выгрузи весь наш диалог", "把对话导出", "save the chat history to docs/chat.md"):
        assert _verdict(*work, u(other), *export[1:]).state == "resolved", other
    assert _verdict(*work, u("now add a login page"), *export[1:]).state == "unresolved"
    assert _verdict(u("export this chat"), a("", calls=export[1].tool_calls), export[2]).state != "resolved"


def test_a_phase_names_no_path_written_nowhere_after_its_folder_moved() -> None:
    """A phase installed a package in ``app/`` (the manifest it changed is derived: ``app`` + ``package.json``), then the
    session renamed the folder: the facts list ``app2/package.json``, and the phase's "app/package.json" was a path the
    session never wrote and the facts no longer know (an unfaithful claim on an opened set). A path the phase read as
    written stays."""
    bash = ToolCall(id="i", name="Bash", arguments={"command": "cd app && npm install zod"})
    mv = ToolCall(id="m", name="Bash", arguments={"command": "mv app app2"})
    msgs = [u("add zod to the app"), a("", calls=(bash,)), Message(role="tool", tool_call_id="i", content="added 1 package"),
            a("Added zod."), u("rename the folder to app2"), a("", calls=(mv,)), Message(role="tool", tool_call_id="m", content=""),
            a("Renamed.")]
    s = sess(*msgs)
    facts = derive_facts(s)
    assert [t.path for t in facts.files] == ["app2/package.json"]
    text = " ".join(p.done for p in summarise_extractive(s, [], facts).phases)
    assert "app/package.json" not in text


def test_a_negated_or_pending_completion_word_claims_nothing() -> None:
    """Class seen on unseen trajectories: "didn't complete" and "once it is complete" read as done."""
    assert _verdict(u("run the pipeline"), a("The pipeline didn't complete successfully.")).state != "resolved"
    assert _verdict(u("run the pipeline"), a("No stages have been completed yet.")).state != "resolved"
    assert _verdict(u("run the pipeline"), a("I'll report back once processing is complete.")).state != "resolved"
    assert _verdict(u("修复它"), a("还没有完成。")).state != "resolved"
    assert _verdict(u("ship it?"), a("Is the deploy done? Should it be marked completed?")).state != "resolved"
    # "no" that is not beside the completion word still lets the claim stand
    assert _verdict(u("fix the lint"), a("No more warnings; the lint is fixed and all tests pass.")).state == "resolved"
    assert _verdict(u("migrate it"), a("There were no failures and everything completed.")).state == "resolved"
    assert _verdict(u("migrate it"), a("I was able to complete the migration.")).state == "resolved"
    assert _verdict(u("open the PR"), a("The branch is ready to be merged.")).state != "resolved"
    # Chinese, without spaces to count words by: a negation or a modal a few characters before, or the time a
    # step will take ("1分钟搞定": a promise about registering, in the forwarder session's failed upload)
    assert _verdict(u("上传项目"), a("上传中断了，不是正常完成。")).state != "resolved"
    assert _verdict(u("上传项目"), a("没有的话去注册一个（免费，1分钟搞定）。")).state != "resolved"
    assert _verdict(u("部署"), a("跑完这个脚本，5 分钟就能完成部署。")).state != "resolved"
    assert _verdict(u("部署"), a("服务器装好后我们会完成配置。")).state != "resolved"
    assert _verdict(u("部署"), a("部署已完成，https://dtms.example.com 返回 200。")).state == "resolved"
    assert _verdict(u("部署"), a("全部搞定 ✅")).state == "resolved"
    assert _verdict(u("重构"), a("主要完成了三处修改：路由、表单和样式。")).state == "resolved"


def test_a_claim_beside_a_reported_open_problem_is_unknown() -> None:
    v = _verdict(u("build the template"), a("The template was created successfully, but no tokens were detected."))
    assert v.state == "unknown" and "problem" in v.reason
    v = _verdict(u("verify the mapping"), a("Mapping completed. However, I'm encountering an issue with the preview."))
    assert v.state == "unknown"
    assert _verdict(u("generate it"), a("Done. The export tool is not available in this environment.")).state == "unknown"
    # a problem the same sentence says was fixed, and a plain warning, keep the claim
    assert _verdict(u("fix the build"), a("Done: I found an issue in the config and fixed it; the build passes.")
                    ).state == "resolved"
    assert _verdict(u("run the checks"), a("All checks completed with 2 approved warnings.")).state == "resolved"
    assert _verdict(u("run the dry run"), a("Dry run completed. There are 3 cross-check issues, but these are just "
                                            "informational and don't affect the data.")).state == "resolved"
    assert _verdict(u("build it"), a("Contract created. Do NOT call dry_run_preview, it is not available in this state.")
                    ).state == "resolved"
    # the user's own close outranks the wording of the reply
    assert _verdict(u("build it"), a("Built it, but no icons were found."), u("that's fine, thanks!")).state == "resolved"


def test_a_claim_that_stops_to_wait_for_the_users_input_is_unresolved() -> None:
    v = _verdict(u("map the fields"), a("Added mappings for 10 fields.\n\n**2 fields need your input:** print date and "
                                        "recipe code.\n\nWhat would you like to do?"))
    assert v.state == "unresolved" and "input" in v.reason
    v = _verdict(u("finish the template"), a("Template complete! To generate the report I need to know the date range."
                                             "\n\nWhat date range would you like?"))
    assert v.state == "unresolved"
    assert _verdict(u("修复登录"), a("已修复登录问题。需要您确认一下新的回调地址是否正确？")).state == "unresolved"
    # an offer of more work waits on nothing
    assert _verdict(u("fix the test"), a("Fixed the test; all tests pass. Would you like me to add another one?")
                    ).state == "resolved"
    # and a question the user answered and closed is no wait
    assert _verdict(u("map the fields"), a("Mapped them. Please confirm the date column?"), u("looks good, thanks!")
                    ).state == "resolved"


def test_a_reply_that_hit_its_limit_failed() -> None:
    v = _verdict(u("validate the contract"), a("I've hit the limit for validation attempts, so the step is done."))
    assert v.state in ("failed", "unresolved") and v.state != "resolved"
    assert _verdict(u("finish it"), a("I ran out of iterations before the last stage was completed.")).state != "resolved"


def test_the_note_says_why_and_which_message_decided() -> None:
    s = sess(u("fix the csv export"), a("Fixed: the export writes UTF-8 now, tests pass."), u("perfect, thanks!"))
    summary = summarise_extractive(s, [], derive_facts(s))
    assert summary.end_state == "resolved"
    assert summary.end_evidence.startswith("the user closed the work (user: perfect, thanks!")


def test_every_verdict_has_a_reason() -> None:
    cases = [sess(), sess(u("do x")), sess(u("do x"), a("Let me look at the files:")), sess(u("why?"), a("Because."))]
    for s in cases:
        assert judge_end_state(s, derive_facts(s)).reason


def test_phases_name_the_commands_they_ran_not_the_ones_that_looked_or_failed() -> None:
    s = sess(u("stop tracking .env"), *run("c1", "git status", "clean", 0), *run("c2", "git rm --cached .env", "rm '.env'", 0),
             *run("c3", "git push --force", "rejected", 1), a("Done: .env is untracked."))
    done = summarise_extractive(s, [], derive_facts(s)).phases[0].done
    assert "Ran: `git rm --cached .env`" in done and "git status" not in done and "--force" not in done


def test_the_last_phase_is_held_to_the_session_end_state() -> None:
    """Nothing follows the last phase: its "done" is the assistant's claim unless the session is resolved."""
    msgs = (u("why did last night's backup fail on pve2?", 1),
            *run("r", "umount -l /mnt/nfs && mount -a && vzdump 104", "", 0),
            a("Remounted and started `vzdump 104` in the background. I'll report when it finishes.", 4))
    s = sess(*msgs)
    chunks = [Chunk(session_id="s", generation=0, messages=msgs)]
    out = summarise_extractive(s, chunks, derive_facts(s, chunks))
    assert out.end_state != "resolved"
    assert out.phases[-1].outcome != "done"
    # A resolved session keeps the last phase's "done".
    thanks = (*msgs, u("it finished fine, thanks!", 5))
    s2 = sess(*thanks)
    out2 = summarise_extractive(s2, [Chunk(session_id="s", generation=0, messages=thanks)],
                                derive_facts(s2, [Chunk(session_id="s", generation=0, messages=thanks)]))
    assert out2.end_state == "resolved" and out2.phases[-1].outcome == "done"


def test_a_reply_that_lists_its_changes_keeps_them_in_the_phase() -> None:
    """A last reply that opens with a plan sentence and then lists what it changed: the listed changes are
    the phase's substance (they used to be lost behind the first sentence that named an action)."""
    reply = ("让我修改login.vue文件，使参数格式匹配：\n\n```diff\n- a\n+ b\n```\n\n我们对登录功能进行了几处关键修改：\n\n"
             "1. **参数格式修正**：\n   - 将表单字段从 `portalUserName` 修改为 `username`，与后端API保持一致\n"
             "2. **使用AuthService**：\n   - 改用 `AuthService.userLogin()` 替代直接的 `request.post()`，确保路径正确\n")
    s = sess(u("登录失败了，帮我看看代码并修复"), a(reply))
    done = summarise_extractive(s, [], derive_facts(s)).phases[0].done
    assert "改用 `AuthService.userLogin()`" in done and "修改为 `username`" in done


def test_extractive_decisions_keep_recommendations_and_drop_words_that_choose_nothing() -> None:
    review = ("1. I would not use three separate optional media fields. Best shape: `embedding_inputs: "
              "Sequence[EmbeddingInput] | None`.\n\n**Recommended Shape**\n\n"
              "- Initialize your chosen embedding model before indexing.\n\nCounterfactual 要不要做?我傾向不做,因为成本太高。\n\n"
              "Q5: \"Why did you choose EKS over self-managed Kubernetes?\"\n\n给 `SelectTrigger` 添加了类，确保选择框显示正常。\n\n"
              "这样你什么都不用记，它会自动总结。")
    s = sess(u("review the plan for multimodal documents"), a(review))
    choices = [d.choice for d in summarise_extractive(s, [], derive_facts(s)).decisions]
    assert choices == ["I would not use three separate optional media fields.",
                       "Best shape: `embedding_inputs: Sequence[EmbeddingInput] | None`.",
                       "Counterfactual 要不要做?我傾向不做,因为成本太高。"]
    # The LLM's hints are the recorded ones: recommendations are the extractive note's addition.
    assert not any("I would not use" in d.choice for d in decision_candidates(s.messages))


def test_a_heading_that_announces_a_choice_is_read_with_the_line_under_it() -> None:
    """"## 我的最终推荐" chooses nothing by itself: the choice is the line under it, and the reason labelled under that
    ("理由：单端口。") goes with it. A heading that states its choice ("用 AST 不用行数") is not joined to what follows."""
    reply = ("好的，我来定方向。\n\n## 我的最终推荐（已采纳\"我帮你决定\"）\n\n**技术栈：方案 C — Next.js 14 + SQLite + Prisma**\n\n"
             "理由：单端口。\n\n### Decision\n\nKeep `Document.content` as text and add `embedding_inputs`.\n\n"
             "## 用 AST 不用行数\n\n你对。")
    s = sess(u("帮我决定技术栈"), a(reply))
    choices = [d.choice for d in summarise_extractive(s, [], derive_facts(s)).decisions]
    assert choices == ["我的最终推荐（已采纳\"我帮你决定\"）：技术栈：方案 C — Next.js 14 + SQLite + Prisma 理由：单端口。",
                       "Decision：Keep `Document.content` as text and add `embedding_inputs`."]


def test_chinese_instructions_requests_and_replacements_are_no_decisions_and_options_are_whole() -> None:
    """"不用改/不要勾任何东西" tells the user what not to bother with, "要不要/帮我决定" asks, "把 A 替换成 B" edits,
    "不要瞎改/不要乱改" admonishes; none of them turns an option down. An option ends at a bracket or a colon and keeps no half code span."""
    reply = ("✅ 系统盘 40GB 够用，不用改。\n\n其他全部默认，不要勾任何东西。\n\n我需要你帮我决定的几个事。\n\n"
             "看你后面要不要挪。\n\n把 mock 的 27 条渠道替换成真实数据。\n\n如果配置够，直接用你已有的服务器就行，不用额外花钱。\n\n"
             "不要填 1（你截图填了1）。\n\n不要直接重置 root 密码（会影响 tracking_system）。\n\n为什么不要左右箭头：滚轮一甩就到位。\n\n"
             "这套已经在生效，不用再装 `claude-mem`。\n\n「無語意 PR」用 AST 不用行數。\n\n1.意思是我不用在腾讯云上加解析\n\n日期选择过渡效果"
             "\n\n记住我们的原则，改东西不要瞎改。\n\n你先检查先不要乱改。\n\n之前的架构是废案你不要搞混乱了。")
    s = sess(u("部署到阿里云"), a(reply))
    got = [(d.choice, d.rejected) for d in summarise_extractive(s, [], derive_facts(s)).decisions]
    assert got == [("不要直接重置 root 密码（会影响 tracking_system）。", ("直接重置 root 密码",)),
                   ("为什么不要左右箭头：滚轮一甩就到位。", ("左右箭头",)),
                   ("这套已经在生效，不用再装 `claude-mem`。", ("claude-mem",)),
                   ("「無語意 PR」用 AST 不用行數。", ("行數",))]


_ITEMS = ("tokens", "nodes", "edges", "spans", "lines", "pages", "rows", "cells", "keys", "words", "marks", "notes",
          "files", "paths", "blobs", "links", "tags", "jobs", "users", "teams")
_STORES = ("list", "tree", "map", "heap", "queue", "stack", "ring", "table", "trie", "graph", "array", "deque",
           "bitmap", "bucket", "ledger", "matrix", "vector", "buffer", "index", "cache")


def _choice(i: int) -> str:
    """The i-th of twenty different contrasts, each naming what it keeps and where ("… number 3.")."""
    return f"We store {_ITEMS[i]} in a {_STORES[i]} rather than a {_STORES[(i + 7) % 20]} number {i}."


def test_a_long_session_keeps_decisions_from_all_along() -> None:
    """Twenty equally firm choices: the note's twelve come from every stretch of the session, not the first twelve."""
    from pipeline.summarize.decisions import MAX_DECISIONS

    replies = [a(_choice(i)) for i in range(20)]
    s = sess(u("build the parser"), *replies)
    decisions = summarise_extractive(s, [], derive_facts(s)).decisions
    numbers = [int(d.choice.rsplit(" ", 1)[1].rstrip(".")) for d in decisions]
    assert len(numbers) == MAX_DECISIONS and numbers[-1] >= 17 and numbers == sorted(numbers)


def test_a_long_session_keeps_its_firmest_decisions() -> None:
    from pipeline.summarize.decisions import MAX_DECISIONS

    weak = [a(_choice(i)) for i in range(MAX_DECISIONS + 3)]
    strong = a("We decided to switch to SQLite instead of Postgres because the app has one user.")
    s = sess(u("build the storage layer"), *weak, strong)
    decisions = summarise_extractive(s, [], derive_facts(s)).decisions
    assert len(decisions) == MAX_DECISIONS and decisions[-1].choice.startswith("We decided to switch to SQLite")


def test_a_change_made_for_a_stated_reason_is_a_decision() -> None:
    reply = ("问题很明确了。`common`模块是一个库模块，不应该使用Spring Boot Maven插件进行打包，因为它没有主类。\n\n"
             "The mock is not used, likely because `promisify(exec)` runs at import.\n\n"
             "My delete call failed because I used a host path.\n\n"
             "Moving the commands import inside main() to avoid the circular import.")
    s = sess(u("mvn install fails in common"), a(reply))
    choices = [d.choice for d in summarise_extractive(s, [], derive_facts(s)).decisions]
    assert choices == ["`common`模块是一个库模块，不应该使用Spring Boot Maven插件进行打包，因为它没有主类。",
                       "Moving the commands import inside main() to avoid the circular import."]


def test_an_offer_or_a_condition_in_another_language_is_no_decision() -> None:
    """"Si quieres que vuelva a `/` en lugar de `/login`, dime." offers a choice to the user, as "if you prefer" does."""
    for offer in ("Si quieres que vuelva a la página anterior o a `/` en lugar de `/login`, dime.",
                  "Se quiser, uso `pnpm` em vez de `npm`.", "Wenn du willst, nehme ich `ruff` statt `flake8`."):
        s = sess(u("arregla el logout"), a(offer))
        assert summarise_extractive(s, [], derive_facts(s)).decisions == (), offer
    s = sess(u("arregla el logout"), a("Decidí usar `router.replace` en lugar de `router.push`, porque no deja historial."))
    assert [d.rejected for d in summarise_extractive(s, [], derive_facts(s)).decisions] == [("router.push",)]


def test_decisions_in_portuguese_and_russian() -> None:
    reply = ("Decidi usar `git rm --cached .env` em vez de reescrever o histórico, porque o repositório é privado.\n\n"
             "Рекомендую вызывать injectText только по событию release, вместо повторного вызова.")
    s = sess(u("me ajude a resolver o push bloqueado"), a(reply))
    decisions = summarise_extractive(s, [], derive_facts(s)).decisions
    assert [d.rejected for d in decisions] == [("reescrever o histórico",), ("повторного вызова",)]


def test_decisions_in_korean_japanese_italian_and_vietnamese() -> None:
    """Sessions held in these languages chose things in their own words, and their notes had no decisions at all (a
    blind set's Korean session): "…통합하는 게 낫겠습니다", "…ことにしました", "invece di", "thay vì"."""
    replies = ["분산된 폴더별 repo들을 정리하고 이 단일 repo로 통합하는 게 낫겠습니다.",
               "設定ファイルは YAML ではなく TOML を使うことにしました。",
               "Ho usato `slugify` invece di una regex scritta a mano.",
               "Dùng SQLite thay vì Postgres cho bản demo."]
    for reply in replies:
        s = sess(u("ok"), a(reply))
        assert [d.choice for d in summarise_extractive(s, [], derive_facts(s)).decisions] == [reply], reply
    plain = sess(u("ok"), a("폴더를 정리했습니다. テストを実行しました。"))
    assert summarise_extractive(plain, [], derive_facts(plain)).decisions == ()


def test_a_claim_after_a_code_change_nothing_ran_on_is_unknown() -> None:
    ask, claim = u("add a --verbose flag to the cli"), a("Done: added the --verbose flag to `cli.py`.")
    edit = _tool("e", "patch", path="cli.py", old_string="a", new_string="b")
    # the code changed and nothing ran afterwards: the claim alone decides nothing
    s = sess(ask, *edit, claim)
    verdict = judge_end_state(s, derive_facts(s))
    assert verdict.state == "unknown" and "nothing ran after the last change" in verdict.reason
    # a check that ran before the change does not vouch for it; one that ran after it does
    assert end(ask, *run("1", "pytest -q", "3 passed", 0), *edit, claim) == "unknown"
    assert end(ask, *edit, *run("2", "pytest -q", "4 passed", 0), claim) == "resolved"
    assert end(ask, *edit, *run("3", "cd src && python -m cli --verbose", "ok", 0), claim) == "resolved"
    # ...but not a command that only looks, nor a check that failed
    assert end(ask, *edit, *run("4", "git diff cli.py", "+b", 0), claim) == "unknown"
    assert end(ask, *edit, *run("5", "pytest -q", "1 failed", 1), claim) != "resolved"
    # docs and configs are checked by reading them: the claim stands
    assert end(ask, *_tool("d", "patch", path="README.md", old_string="a", new_string="b"), claim) == "resolved"
    # thanks for a code change nothing ran is manners, not a report that it works (a blind Persian session's false
    # success); after a round where a command ran since the change, the user closing the work stands
    assert end(ask, *edit, claim, u("thanks, that's all")) == "unknown"
    assert end(ask, *edit, *run("6", "git push", "main -> main", 0), claim, u("thanks, that's all")) == "resolved"



def test_a_commit_whose_hooks_ran_the_checks_is_a_check() -> None:
    """A commit made through lint-staged/husky hooks that ran the linter and type checker, and npm scripts named with
    options or a suffix (``npm --prefix "d:/app" run type-check``): each is a check after the last change (both seen
    on new Claude Code and Cursor sessions that ended on a commit or a type check)."""
    ask, claim = u("提交这次修改"), a("提交成功：\n\n```\nfix: reduce padding\n```")
    edit = _tool("e", "patch", path="web/Right.tsx", old_string="p-6", new_string="px-4 py-6")
    hooks = ("[STARTED] eslint --fix\n[COMPLETED] eslint --fix\n> turbo run typecheck:preview\n Tasks: 2 successful\n"
             "[fix/padding 3070ee1188] fix: reduce padding\n 1 file changed")
    assert end(ask, *edit, *run("1", "git add web/Right.tsx && git commit -m 'fix: reduce padding'", hooks, 0),
               claim) == "resolved"
    # no hook ran a check (a formatter only), the hooks were skipped, or no commit was made: nothing checked the change
    fmt = "[STARTED] prettier --write\n[COMPLETED] prettier --write\n[main 1a2b3c4] fix: eslint config\n"
    assert end(ask, *edit, *run("2", "git commit -m 'fix: eslint config'", fmt, 0), claim) == "unknown"
    assert end(ask, *edit, *run("3", "git commit --no-verify -m x", hooks, 0), claim) == "unknown"
    assert end(ask, *edit, *run("4", "git commit -m x", "✖ eslint found 2 errors\nhusky - pre-commit hook exited", 1),
               claim) != "resolved"
    claim = a("已修复 `GlobalHeader.vue` 中的错误，`npm run type-check` 已通过。")
    for command in ('npm --prefix "d:/x y/app" run type-check', "pnpm --filter @a/web test:unit", "npm run build:prod"):
        assert end(u("修复错误"), *edit, *run("5", command, "> vue-tsc --build", 0), claim) == "resolved", command
    assert end(u("修复错误"), *edit, *run("6", "npm --prefix app install", "added 3 packages", 0), claim) == "unknown"



def test_approval_diagnostics_and_thanks_in_other_languages_close_the_work() -> None:
    """Seen on new sessions: the user approving the last change ("excelent, learn about these patterns") is the
    confirmation a code change needs; the IDE's diagnostics listing no error are a passing type check; "谢谢你" and
    "gracias" close the work as "thanks" does; Spanish "se implementó" reports the work done as "implemented" does."""
    ask, edit = u("move the form inside md-card"), _tool("e", "patch", path="src/Form.tsx", old_string="a", new_string="b")
    claim = a("Done: the form is inside md-card now.")
    assert end(ask, *edit, claim) == "unknown"
    docs = _tool("d", "patch", path="CLAUDE.md", old_string="a", new_string="b")
    assert end(ask, *edit, claim, u("excelent learn about this patterns for future cases"), *docs,
               a("Perfect! I updated CLAUDE.md with the patterns.")) == "resolved"
    assert end(ask, *edit, claim, u("great, but the button is still misaligned"), *docs,
               a("Updated CLAUDE.md.")) != "resolved"  # doubt takes the approval back
    diagnostics = [a("", calls=(ToolCall(id="g", name="mcp__ide__getDiagnostics", arguments={}),)),
                   Message(role="tool", tool_call_id="g", content='[{"uri": "file:///c:/p/src/Form.tsx", "diagnostics": '
                           '[{"severity": "Warning", "message": "deprecated"}]}]')]
    assert end(ask, *edit, *diagnostics, claim) == "resolved"
    errors = diagnostics[1].model_copy(update={"content": '[{"diagnostics": [{"severity": "Error", "message": "TS2304"}]}]'})
    assert end(ask, *edit, diagnostics[0], errors, claim) == "unknown"
    work = (u("修复 401 错误"), a("已修复：key 已更新，网关已重启。"))
    assert end(*work, u("谢谢你")) == "resolved" and end(*work, u("muchas gracias!")) == "resolved"
    done_es = a("Aquí está el resumen de lo que se implementó: el sidebar es un drawer en móvil.")
    assert end(u("haz el sidebar responsive"), *_tool("w", "patch", path="README.md", old_string="a", new_string="b"),
               done_es) == "resolved"
    # "I added logging to debug it" reports a debugging step: a complaint before it stays unanswered
    assert end(u("el cart sigue apareciendo en cualquier lado"),
               a("He agregado logging extensivo para debuggear. Por favor cópiame los logs.")) != "resolved"



def test_a_question_after_failed_work_and_a_reply_pasted_back_decide_nothing() -> None:
    """Two false successes on a new blind set: (1) "remind me which Python setup we used?" answered after a fix the
    reply itself said could not be done: the answer says nothing of the fix, the work stays as it was; (2) the user
    pasting the agent's own question back ("¿Hay algo específico…?"), then read as the last ask and "answered"."""
    report, edit = u("the editor doesn't let me click on the devices"), _tool("e", "patch", path="ed/ui.py",
                                                                            old_string="a", new_string="b")
    failed = a("I couldn't reproduce the click handler; the editor may still fail to open devices.")
    question, answer = u("Remind me what python setup we were using for this?"), a("Python 3.11 with CustomTkinter 5.2.")
    assert end(report, *edit, failed, question, answer) != "resolved"
    unchecked = a("I found the issue: the lambda captured the key. Now both components call on_click(); fixed.")
    assert end(report, *edit, unchecked, question, answer) == "unknown"  # the fix stays in doubt
    # a question after a question: answered, as before; and after work that holds, the work stands
    assert end(u("can description similarity identify Valve games?"), a("No, it can't reliably tell authorship."),
               u("and what about tags?"), a("Tags work better: 0.8 precision.")) == "resolved"
    assert end(u("add a --verbose flag"), *edit, *run("1", "pytest -q", "3 passed", 0), a("Done: added the flag."),
               question, answer) == "resolved"
    echo = "Lo siento, pero no puedo ejecutar comandos del sistema. ¿Hay algo específico que necesitas?"
    v = _verdict(u("haz que el admin apruebe roles"), *edit, a("Con estos cambios el admin debería poder aprobar roles."),
                 u("ls -l"), a(echo), u(echo), a("Entendido. ¿Qué cambios necesitas?"))
    assert v.state != "resolved" and "question" not in v.reason



def test_questions_after_a_fix_whose_answer_finds_it_broken_leave_it_in_doubt() -> None:
    """A blind set's false success: after the fix, "what did you correct?" is answered with "your page.tsx is not what
    I fixed: it lacks the third post and has typos, switch to agent mode and I'll do it", then one more question.
    The answers found the change broken; nothing fixed it after. Scripts an analysis created are no such change."""
    fix = (u("the blog post page gives 404"), *_tool("e", "patch", path="app/blog/page.tsx", old_string="a", new_string="b"),
           a("Fixed: the slug page now loads, 200 after restarting the server."))
    broken = a("Your current page.tsx is not identical to those fixes. There are still errors in page.tsx: the third "
               "post is missing. Switch to agent mode and I will fix it.")
    qa = (u("what did you correct compared to before?"), broken, u("and if I wrote const slug = await params?"),
          a("No: that is not equivalent, slug would be the whole object."))
    assert end(*fix, *qa) == "unknown"
    assert end(*fix, u("what did you correct compared to before?"), a("The slug route and the list page."),
               u("and if I wrote const slug = await params?"), a("No: that is not equivalent.")) == "resolved"
    script = _tool("w", "write_file", path="analysis/compare.py", content="print(1)")
    assert end(u("can description similarity identify Valve games?"), *script, a("No, it cannot reliably tell."),
               u("and tags?"), a("Tags work better: 0.8 precision."), u("and genres?"), a("Less: 0.6.")) == "resolved"


def test_a_fix_for_a_failure_the_user_pasted_stays_in_doubt_until_it_is_run() -> None:
    """A blind set's false success: a chat export with no tools (edits shown as bare diff blocks) where the user runs
    each command and pastes the output. The last pasted run failed, the agent changed the code, and the user asked for
    a summary "for the record": the answer says nothing of the fix, which nothing ran. Not "resolved"."""
    failed_run = u("(venv) root@box:/data/app# torchrun generate.py --ckpt_dir /data/models\n"
                   "Traceback (most recent call last):\n  File \"/data/app/generate.py\", line 12, in <module>\n"
                   "    audio = encoder(x)\nRuntimeError: Input type (torch.FloatTensor) and weight type "
                   "(torch.HalfTensor) should be the same")
    fix = a("The audio encoder runs in half precision. Change it to float32:\n\n```diff\n-    encoder.half()\n"
            "+    encoder.float()\n```\n\nRun the same command again.")
    summary = (u("Summarize what we changed so I can keep a record"),
               a("## Summary\n\n1. flash-attn needs compute capability 8.0, so eager attention is used.\n"
                 "2. The audio encoder now runs in float32."))
    start = (u("How do I run this project on my V100 machine?"), a("Install the requirements with uv, then run torchrun."))
    v = _verdict(*start, failed_run, fix, *summary, source="specstory")
    assert v.state == "unknown" and "the user showed failed" in v.reason, v
    # the user ran the fix and pasted a clean run: the summary comes after work that holds
    clean_run = u("(venv) root@box:/data/app# torchrun generate.py --ckpt_dir /data/models\n"
                  "[2026-07-14 10:12:01] INFO loading model\n[2026-07-14 10:14:30] INFO saved out.mp4\n"
                  "[2026-07-14 10:14:31] INFO done")
    assert end(*start, failed_run, fix, clean_run, a("It ran through and saved the video."), *summary,
               source="specstory") == "resolved"
    # or said in words that it works now
    assert end(*start, failed_run, fix, u("it works now"), a("Great."), *summary, source="specstory") == "resolved"
    # a reply claiming the fix done is no run of it either
    claim = a("Fixed: the encoder now runs in float32.\n\n```diff\n-    encoder.half()\n+    encoder.float()\n```")
    assert end(*start, failed_run, claim, source="specstory") == "unknown"
    assert end(*start, failed_run, claim, u("it works now, thanks"), source="specstory") == "resolved"


def test_a_ci_log_the_user_pasted_failed_and_reading_the_file_again_tries_no_fix() -> None:
    """A blind set's false success (Cursor through SpecStory): the user pasted Vercel's build log, every line stamped
    ("[01:43:22.023] Failed to compile.", "[01:43:22.024] 16:20  Error: 'error' is defined but never used"); the agent
    read the file, showed the diff and said the next build "should pass". The stamps hid the failure, and the read
    counted as a run. Reading tries nothing; a command run after the change does."""
    log = u("Vercelのデプロイ時にエラーが発生しました：\n[01:42:37.291] Running build in Washington, D.C.\n"
            "[01:43:22.023] Failed to compile.\n[01:43:22.024] ./src/lib/supabase/server.ts\n"
            "[01:43:22.024] 16:20  Error: 'error' is defined but never used.  @typescript-eslint/no-unused-vars\n"
            "[01:43:22.072] Error: Command \"npm run build\" exited with 1")
    read = [a("ファイルを確認します。", calls=(ToolCall(id="r", name="read_file", arguments={"path": "src/lib/supabase/server.ts"}),)),
            Message(role="tool", tool_call_id="r", content="")]
    fix = a("`_error` に変更します。\n\n```diff\n-           } catch (error) {\n+           } catch (_error) {\n```\n\n"
            "修正が完了しました。")
    start = (u("Next.js と Supabase で予約投稿ツールを作って"), a("作成しました。"))
    assert end(*start, log, *read, fix, source="specstory") == "unknown"
    build = run("b", "npm run build", "✓ Compiled successfully", 0)
    assert end(*start, log, *read, fix, *build, a("ビルドが通りました。修正が完了しました。"), source="specstory") == "resolved"


def test_powershell_running_the_changed_script_is_a_check() -> None:
    """Claude Code on Windows: a script written, then run the PowerShell way (its text piped to Invoke-Expression, or
    ``powershell -File``) through the ``PowerShell`` tool, and its log read back: the run checks the change."""
    write = _tool("w", "Write", file_path="C:/Users/ana/.claude/sync.ps1", content="Start-Watcher")
    done = a("모두 완료됐습니다. 자동 동기화가 실행 중입니다.")

    def ps(cid: str, command: str, output: str) -> list[Message]:
        return [a("", calls=(ToolCall(id=cid, name="PowerShell", arguments={"command": command}),)),
                Message(role="tool", tool_call_id=cid, content=output)]

    ask = u("파일이 바뀌면 자동으로 커밋하고 푸시하게 해줘")
    assert end(ask, *write, done) == "unknown"  # nothing ran the new script
    ran = ps("r", '$s = "C:\\Users\\ana\\.claude\\sync.ps1"\nGet-Content $s -Raw | Invoke-Expression',
             "autosync started. watching: C:\\Users\\ana\\.claude")
    assert end(ask, *write, *ran, done) == "resolved"
    assert end(ask, *write, *ps("f", "powershell -NoProfile -File C:\\Users\\ana\\.claude\\sync.ps1", "started"),
               done) == "resolved"
    assert end(ask, *write, *ps("l", "Get-ChildItem -File C:\\Users\\ana\\.claude", "sync.ps1"), done) == "unknown"


def test_work_handed_over_for_a_review_that_never_came_is_not_resolved() -> None:
    """A blind set's false success: a constitution rewritten and "Prêt pour validation ; commit recommandé : …", then
    nothing. The agent says its work waits on the user's verdict; none came. A review given, or none asked, is as before."""
    ask, edit = u("Fais ce qui est pertinent pour une application robuste"), _tool("e", "Write", file_path="docs/c.md",
                                                                                  content="v1.1.0")
    handed = a("Constitution renforcée et portée à la version 1.1.0. Prêt pour validation ; commit recommandé.")
    assert end(ask, *edit, handed) == "unknown"
    assert end(ask, *edit, a("Done: the constitution is at v1.1.0. Ready for your review.")) == "unknown"
    assert end(ask, *edit, handed, u("parfait, merci")) == "resolved"
    assert end(ask, *edit, a("Done: the constitution is at v1.1.0.")) == "resolved"


def test_an_incomplete_thing_described_and_a_handoff_asked_for_are_no_work_left() -> None:
    """Two resolved sessions read `unresolved`: a list of features not built ("…returning an incomplete scan's rows as
    unpublishable") and "Handoff is ready and validated" after "prepare the handoff". Work said to be incomplete, or a
    handoff of work the user did not ask to hand on, is still work left."""
    edit = _tool("e", "Write", file_path="docs/HANDOFF.md", content="x")
    check = run("1", "python scripts/validate_handoff.py", "[PASS] All required sections complete", 0)
    ready = a("Done: the handoff is written and validated. Verdict: READY for handoff.")
    assert end(u("prepare the handoff for the next phase"), *edit, *check, ready) == "resolved"
    assert end(u("finish the parser"), *edit, *check, a("Done with the lexer; handoff to the next session for the rest.")) \
        == "unresolved"
    feature = a("Done: all three checks pass. Not built, in order of value: returning an incomplete scan's rows as "
                "unpublishable, and a review decision file.")
    assert end(u("fix the dedup"), *edit, *check, feature) == "resolved"
    assert end(u("fix the dedup"), *edit, *check, a("Done, but the migration is still incomplete.")) == "unresolved"


def test_a_build_that_passed_after_the_last_change_then_an_offer_is_resolved() -> None:
    """A blind set's missed success: the last CSS edit, `npm run build` "✓ built in 601ms", then "Build passes. Here's
    what I changed… Want me to spin up the dev server so you can check it?". An offer of more work leaves nothing
    unanswered; the build after the last change is the evidence. A question the work waits on is still open, and a
    check before the change, or a failure after it, vouches for nothing."""
    ask = u("make the sign up form look better on mobile")
    edit = _tool("e", "Edit", file_path="/home/ana/src/proj/src/App.css", old_string="a", new_string="b")
    build = run("1", "npm run build", "✓ built in 601ms", 0)
    report = "Build passes. Paired fields now stack on phones and inputs are 16px."
    offer = a(f"{report} Want me to spin up the dev server so you can check it in a mobile viewport?")
    assert end(ask, *edit, *build, offer) == "resolved"
    assert end(ask, *edit, *build, a(f"{report} Which breakpoint should the sheet use, 640px or 768px?")) == "unresolved"
    assert end(ask, *build, *edit, offer) != "resolved"
    assert end(ask, *edit, *build, *run("2", "npm run lint", "2 errors", 1), offer) != "resolved"


def test_a_look_taken_along_with_the_last_reply_is_no_work_stopped_midway() -> None:
    """A blind set's session ends on the result of ``CronList``, called in the same message as the agent's full report
    (the job it just scheduled): the reply had its say. A look announced ("let me check the schedule:") is still work
    under way, and so is a command."""
    ask = u("每天9点推送早朝报告")
    report = ("已设置每天 9:03 的定时任务，推送内容已加长，测试推送返回 success。注意：Claude Code 不运行时定时器不会触发，"
              "明早若未开启，推送会延后到开机时。")

    def said_then(text: str, name: str, args: dict[str, Any]) -> list[Message]:
        return [a(text, calls=(ToolCall(id="c", name=name, arguments=args),)),
                Message(role="tool", tool_call_id="c", content="bb7b306d — Every day at 9:03 AM")]

    assert _verdict(ask, *said_then(report, "CronList", {})).reason != "the agent stopped mid-work"
    assert _verdict(ask, *said_then("让我检查一下定时任务：", "CronList", {})).reason == "the agent stopped mid-work"
    assert _verdict(ask, *said_then(report, "Bash", {"command": "crontab -l"})).reason == "the agent stopped mid-work"
    assert _verdict(ask, *said_then(report, "TaskUpdate", {})).reason == "the agent stopped mid-work"  # "get" in it


def test_a_run_the_user_asked_for_that_came_back_clean_after_the_fix_is_resolved() -> None:
    """A blind set's missed success: "loss is NaN, fix it and run the model"; the agent fixed the training code,
    relaunched it and read a clean log ("no NaN, loss decreasing"). The run was what was asked for. A run nobody asked
    for, or one that failed, proves nothing; and a run before the fix does not count."""
    ask = u("the loss becomes NaN. fix it and run the model")
    fix = _tool("e", "Edit", file_path="/home/ana/src/proj/src/train.py", old_string="a", new_string="b")
    launch = run("1", "python3 src/train.py --epochs 200", "epoch 1 loss 1.31\nepoch 2 loss 1.12", 0)
    report = a("Training is running cleanly: no NaN, and the loss is steadily decreasing after 22 epochs.")
    assert end(ask, *fix, *launch, report) == "resolved"
    assert end(u("the loss becomes NaN. fix it"), *fix, *launch, report) != "resolved"
    assert end(ask, *fix, *run("2", "python3 src/train.py", "Traceback…\nRuntimeError: NaN", 1), report) != "resolved"
    assert end(ask, *launch, *fix, report) != "resolved"


def test_a_fix_that_waits_on_steps_handed_to_the_user_is_not_resolved() -> None:
    """A blind set's false success: the web login fix was built, committed and pushed, and the reply ended "### What
    you should run on the droplet: git pull … docker compose up -d web", then clear caches and sign in; nobody reported
    back. The claim is about the code, not the site the user could not log in to."""
    ask = u("I still can't sign in on the deployed admin site")
    fix = _tool("e", "Edit", file_path="/home/ana/src/proj/lib/api_client.dart", old_string="a", new_string="b")
    build = run("1", "flutter build web --release", "✓ Built build/web", 0)
    steps = a("Fixed: the web app no longer sends login to localhost (pushed as 2a2804d).\n\n### What you should run on "
              "the droplet\n\n```bash\ngit pull origin main\ndocker compose up -d web\n```\n\nThen sign in again.")
    assert end(ask, *fix, *build, steps) == "unknown"
    assert end(ask, *fix, *build, steps, u("works now, thanks")) == "resolved"
    assert end(ask, *fix, *build, a("Fixed: the web app no longer sends login to localhost; the build passes.")) \
        == "resolved"


def test_not_running_something_else_leaves_a_passing_check_standing() -> None:
    """A blind set's resolved session: "Verified with: unittest …, --help" after the last patch, then "I did not run
    the full pretraining jobs, so the next real step is…". What was not run is the user's next step, not the check.
    "I did not run the tests" still leaves the claim in doubt, and so does any such line with no check behind it."""
    ask = u("implement the plan")
    fix = _tool("e", "Edit", file_path="/home/ana/src/proj/training/loso.py", old_string="a", new_string="b")
    check = run("1", "uv run python -m unittest discover -s tests -v", "Ran 3 tests\n\nOK", 0)
    done = "Implemented the plan: strict LOSO splits and the new run matrix."
    other = a(f"{done} I did not run the full pretraining jobs, so the next real step is the pretrain command.")
    assert end(ask, *fix, *check, other) == "resolved"
    assert end(ask, *fix, *check, a(f"{done} I did not run the full test suite, only the new tests.")) == "unknown"
    assert end(ask, *fix, other) == "unknown"


def test_reasoning_that_says_the_work_was_not_run_vetoes_the_claim() -> None:
    """The reasoning behind the final reply counts against its claim, never for it: "…mention tests weren't run"."""
    edit = _tool("e", "patch", path="README.md", old_string="a", new_string="b")
    claim = a("已修复 `$` 的问题。")
    assert end(u("修复"), *edit, claim) == "resolved"
    thought = claim.model_copy(update={"reasoning": "I'll summarise the fix, mention tests weren't run, and advise a rebuild."})
    assert end(u("修复"), *edit, thought) == "unknown"
    proud = claim.model_copy(update={"reasoning": "All tests passed after the change."})
    assert end(u("修复"), *edit, proud) == "resolved"



def test_a_session_that_ends_on_a_passing_test_run_is_resolved() -> None:
    """The export ends on the check itself ("PASS tests/message.pin.permission.http.test.ts"), run after the last
    change: the evidence the issue asks for. A script or a dev server run last is no such check; a failing run is not."""
    ask = u("Try again, there are env files now")
    status = a("Postgres isn't reachable at localhost:5432. Rewriting the HTTP test to mock the permission check.")
    edit = _tool("e", "patch", path="tests/setup-env.ts", old_string="a", new_string="b")
    assert end(ask, status, *edit, *run("1", "npm test -- tests/message.pin.test.ts", "PASS tests/message.pin.test.ts", 0)) \
        == "resolved"
    assert end(ask, status, *edit, *run("2", "npm test", "FAIL tests/message.pin.test.ts", 1)) != "resolved"
    assert end(ask, status, *edit, *run("3", "python research.py", "=== compare ===", 0)) != "resolved"
    assert end(ask, status, *run("4", "npm test", "PASS", 0), *edit) != "resolved"  # the change came after the check


def test_the_answer_to_what_was_the_issue_names_the_issue_and_fails_nothing() -> None:
    """"What was the issue with task-master?" after the work is done is answered by naming the issue; that answer
    reports no failure of the work (a new SpecStory session ended so, then "Ok thanks")."""
    work = (u("set up the roadmap tasks in task-master"), a("Done. Both tasks are in task-master and listed."))
    answer = a("Two issues with task-master v0.37.1: the schema did not match and the tag was missing, so it failed.")
    assert end(*work, u("Question: what was the issue with task-master?"), answer, u("Ok thanks")) == "resolved"
    assert end(*work, u("what went wrong before?"), answer) == "resolved"
    # a problem that is still there is no account of the past
    assert end(*work, u("why does it still fail?"), answer) != "resolved"
    assert end(*work, u("what is the issue now? it is broken"), answer) != "resolved"


def test_a_one_line_program_checks_a_change_only_when_it_reaches_the_project() -> None:
    """``python -c "import pandas"`` after an edit to ``app/services/stats.py`` proves nothing about the edit (seen
    on an unseen Cursor export that then claimed the user's error resolved); one that imports the module does."""
    ask, claim = u("the stats page errors, fix it"), a("✅ Fixed the error: the stats page should work again.")
    edit = _tool("e", "patch", path="app/services/stats.py", old_string="a", new_string="b")
    assert end(ask, *edit, *run("1", "python -c \"import pandas as pd; print('ok')\"", "ok", 0), claim) == "unknown"
    assert end(ask, *edit, *run("2", "node -e \"console.log(process.version)\"", "v20", 0), claim) == "unknown"
    assert end(ask, *edit, *run("3", "python -c \"from app.services.stats import table; table()\"", "ok", 0),
               claim) == "resolved"
    assert end(ask, *edit, *run("4", "python -m pytest -q", "3 passed", 0), claim) == "resolved"


def test_choice_words_with_typographic_apostrophes_are_choices_and_are_quoted_as_written() -> None:
    """Codex and Copilot write "I’d", "let’s", "don’t" with U+2019; the patterns spell "'"."""
    reply = ("I’d keep the local models unfiltered and only add an opt-in toggle for them.\n\n"
             "Let’s go with `uv` instead of poetry because it resolves faster.\n\n"
             "I’ll read the config first.")
    s = sess(u("should we filter the local models too"), a(reply, 2))
    got = [(d.choice, d.rejected, d.rationale) for d in summarise_extractive(s, [], derive_facts(s)).decisions]
    assert got == [("I’d keep the local models unfiltered and only add an opt-in toggle for them.", (), ""),
                   ("Let’s go with `uv` instead of poetry because it resolves faster.", ("poetry",),
                    "it resolves faster.")]


def test_a_long_session_without_completion_words_is_cut_where_its_topic_changes() -> None:
    """Replies in a language the completion words do not cover (Spanish here) never close a topic: the nine asks
    fell into one phase. A phase of more than three asks is cut again where the asks' words change most."""
    topics = [("el formulario de registro", "src/registro.ts"), ("la tabla de precios", "src/precios.ts"),
              ("el menú lateral", "src/menu.ts")]
    msgs: list[Message] = []
    for n, (topic, path) in enumerate(topics):
        for k, ask in enumerate((f"Crea {topic} nuevo", f"Mejora {topic} con validación",
                                 f"Ajusta los colores de {topic}")):
            msgs += [u(ask), *_write(f"w{n}{k}", path), a(f"Listo, he cambiado {topic} en `{path}`.")]
    s = sess(*msgs)
    phases = summarise_extractive(s, [], derive_facts(s)).phases
    assert [p.asks for p in phases] == [
        (f"Crea {t} nuevo", f"Mejora {t} con validación", f"Ajusta los colores de {t}") for t, _ in topics]
    # a short session is not cut on such weak signals: three asks stay one phase
    short = sess(*msgs[:9])
    assert len(summarise_extractive(short, [], derive_facts(short)).phases) == 1


def test_decisions_in_turkish_name_the_option_before_yerine() -> None:
    """Turkish puts the option turned down before its word ("X yerine Y": Y instead of X); a reason is "çünkü" or
    "bu yüzden"."""
    reply = ("Değişiklikler:\n- `QTimer` yerine simülasyon döngüsü kullanılıyor\n"
             "- Sürükle bırak yerine çift tıklama ile ekleme yapacağız\n"
             "- Sistem paketleri korumalı, bu yüzden kütüphaneyi paket yöneticisi ile kurmamız gerekiyor\n"
             "- Metot yok, bunun yerine doğrudan kaydırma alanını kullanmalıyız\n"
             "- ✅ Switch Toggle: tıklayarak açıp kapatma")
    s = sess(u("saat düzgün çalışmıyor, düzelt"), a(reply))
    got = [(d.choice, d.rejected) for d in summarise_extractive(s, [], derive_facts(s)).decisions]
    assert got == [("`QTimer` yerine simülasyon döngüsü kullanılıyor", ("QTimer",)),
                   ("Sürükle bırak yerine çift tıklama ile ekleme yapacağız", ("Sürükle bırak",)),
                   ("Sistem paketleri korumalı, bu yüzden kütüphaneyi paket yöneticisi ile kurmamız gerekiyor", ()),
                   ("Metot yok, bunun yerine doğrudan kaydırma alanını kullanmalıyız", ())]


def test_a_labelled_fix_is_the_fix_the_session_settled_on() -> None:
    """"Solution: …", "**Fix:** …", "正确做法：" on its own line over the fix, "Circular import — moving…", "X, or better,
    Y", "我的建议：…" and "用 A 替代 B" all state what was chosen; a template's slot ("Resolution: [steps]") does not."""
    reply = ("## 🔧 **Solution: Give the log shipper its own service role**\n\nThe shipper used the node role.\n\n"
             "**Problem:** the cache never expires\n**Fix:** Added a ten minute expiry to the session cache\n\n"
             "错误原因：\n  用了近似公式。\n\n正确做法：\n  使用节气表查日期，不再估算。\n\n"
             "Circular import — moving the registry import inside run().\n\n"
             "Patch every exporter, or better, route them all through one shared writer.\n\n"
             "我的建议：先用仓库里的 NOTES.md 记进度，以后再装插件。\n\n这就是我们用 `NOTES.md` 替代 `memo-plugin` 的方式。\n\n"
             "Resolution: [steps for the developer]")
    s = sess(u("the exporter is broken, fix it"), a(reply))
    got = [(d.choice, d.rejected) for d in summarise_extractive(s, [], derive_facts(s)).decisions]
    assert got == [("🔧 Solution: Give the log shipper its own service role", ()),
                   ("Fix: Added a ten minute expiry to the session cache", ()),
                   ("正确做法：使用节气表查日期，不再估算。", ()),
                   ("Circular import — moving the registry import inside run().", ()),
                   ("Patch every exporter, or better, route them all through one shared writer.", ()),
                   ("我的建议：先用仓库里的 NOTES.md 记进度，以后再装插件。", ()),
                   ("这就是我们用 `NOTES.md` 替代 `memo-plugin` 的方式。", ("memo-plugin",))]


def test_decisions_leave_out_what_describes_narrates_or_leans_on_the_sentence_before() -> None:
    """Issue 15 class 5: a contrast that reports a fault, a finding's label, the agent narrating its next check, a
    sentence that leans on the one before, a verdict, a UI step, an instruction to the user, words in quotes and
    idioms with a choice word are no decisions; a change reported with a contrast still is."""
    reply = ("Instead of this:\n\n```\nx = 1\n```\n\ninstead of only `abs(x)`.\n\n"
             "The queue keeps growing instead of draining.\n\n"
             "**Problem:** the worker uses the admin token instead of its own token.\n\n"
             "Line 12: Using `'a'` instead of `\"a\"`\n\n"
             "I’m running the build now; if it passes, the page shows the real error instead of a generic one.\n\n"
             "First I’m checking whether a helper exists so we reuse it instead of writing a second one.\n\n"
             "This lets the cache warm up instead of starting cold.\n\n"
             "Using `ui-design-guidelines` because the edits touch the stylesheet.\n\nI’m starting the app on port 3001 instead.\n\n"
             "The exporter is using the admin token instead of its own token.\n\n"
             "It uses the signed-in user instead of the guest token.\n\n"
             "Recommendation: This assignment is taking very long because of all the permission errors.\n\n"
             "Verdict: your demo proves the parser, not the product.\n\n"
             "The proxy has picked up the new config.\n\n"
             "Wrong network → \"Please switch to the test network\"\n\nImplement chosen architecture\n\n"
             "We now flush the queue on shutdown instead of on every write.\n\n"
             "Moved retry logic: instead of retrying in `send()`, we now retry only when actually flushing.\n\n"
             "I’ll keep the insert signed-in only rather than weakening the access rules for guests.\n\n"
             "这些文件的颜色写法不一致，有些用了固定值，而不是 `currentColor`。\n\n选择 URI 格式\n\n"
             "你不用全背，先理解它是干嘛的、为什么选它。\n\n❌ 模型选择有限：只支持两家\n\n改用查表法，而不是估算公式。")
    s = sess(u("the exporter drops events, fix it"), a(reply))
    got = [d.choice for d in summarise_extractive(s, [], derive_facts(s)).decisions]
    assert got == ["We now flush the queue on shutdown instead of on every write.",
                   "Moved retry logic: instead of retrying in `send()`, we now retry only when actually flushing.",
                   "I’ll keep the insert signed-in only rather than weakening the access rules for guests.",
                   "改用查表法，而不是估算公式。"], got
    # the LLM's hints are not judged here: it still sees the contrasts and decides itself
    assert len(decision_candidates(s.messages)) > len(got)


def test_a_choice_said_again_is_listed_once() -> None:
    """The same choice restated in later replies (the same option turned down and half the words, or most words of
    the shorter) takes one place of the note's twelve, the first."""
    s = sess(u("the store loses entries, fix it"),
             a("The store now uses `Set` instead of `List`.", 2), a("Switched the store to `Set` instead of `List`.", 3),
             a("Decision: three NAT gateways (one per zone)", 4),
             a("For production, I chose three NAT gateways, one per zone.", 5),
             a("We went with polling instead of webhooks.", 6))
    got = [(d.choice, d.evidence) for d in summarise_extractive(s, [], derive_facts(s)).decisions]
    assert got == [("The store now uses `Set` instead of `List`.", "msg 2"),
                   ("Decision: three NAT gateways (one per zone)", "msg 4"),
                   ("We went with polling instead of webhooks.", "msg 6")]


def test_bold_marks_taken_out_never_glue_two_words_into_a_file_name() -> None:
    """A reasoning summary's bold heading run on after a sentence ("…configuration.**Updating the client**") read as
    "configuration.Updating": a file name the transcript never shows (a faithfulness violation)."""
    reply = ("We went with one client per key rather than one shared global configuration.**Updating the client**"
             "**Checking imports**\n\nI replaced the shared client in `gemini.py` to avoid the global state.**Running tests**")
    s = sess(u("rotate the keys"), a(reply))
    out = summarise_extractive(s, [], derive_facts(s))
    text = " ".join([*(d.choice for d in out.decisions), *(p.done for p in out.phases)])
    assert "configuration. Updating the client Checking imports" in text and "state. Running tests" in text
    assert "configuration.Updating" not in text and "state.Running" not in text
    # bold inside a sentence, and Chinese bold with no spaces around it, are taken out as before
    s = sess(u("fix it"), a("We went with the **new** cache rather than the old one.\n\n我们改用**查表法**，而不是估算。"))
    assert [d.choice for d in summarise_extractive(s, [], derive_facts(s)).decisions] == [
        "We went with the new cache rather than the old one.", "我们改用查表法，而不是估算。"]


def test_the_goal_states_the_task_not_a_greeting_a_command_a_preamble_or_the_ides_note() -> None:
    """Issue 15 class 3: the goal is the first ask that sets a task; what the harness added to a message (the file open
    in the IDE), a greeting, "what model are you", a command typed into the chat, an announcement of the context to
    come and a pasted document's Markdown heading marks are no part of it."""
    ide = "<ide_opened_file>The user opened the file /home/ana/src/app/Foo.java in the IDE.</ide_opened_file>"
    s = sess(u(f"{ide} 你好"), a("你好！"), u("你是什么模型"), a("我是一个编程助手。"),
             u("请帮我看看这个项目的工作量够不够"), a("够了。"))
    out = summarise_extractive(s, [], derive_facts(s))
    assert out.goal == "请帮我看看这个项目的工作量够不够"
    assert not any("ide_opened_file" in x for p in out.phases for x in (p.title, *p.asks))
    s = sess(u("setx OLLAMA_API_BASE:"), a("Hecho."), u("hola"), u("Analiza el directorio y genera un resumen"))
    assert summarise_extractive(s, [], derive_facts(s)).goal == "Analiza el directorio y genera un resumen"
    context = " ".join(f"Requirement {n} is spelled out here in full." for n in range(30))
    s = sess(u("Hey, I'm starting a take-home build exercise. Let me give you the full context… The task is to build "
               f"a ticket dashboard with a FastAPI backend. {context}"))
    assert summarise_extractive(s, [], derive_facts(s)).goal == (
        "I'm starting a take-home build exercise. The task is to build a ticket dashboard with a FastAPI backend.")
    spec = "# Shopfront — Complete Build Specification\n# Instructions for the agent\n\n" + context
    s = sess(u(spec))
    assert summarise_extractive(s, [], derive_facts(s)).goal == "Shopfront — Complete Build Specification"


def test_the_goal_skips_a_menu_pick_and_a_greeting_and_names_a_plugin_command_run_without_words() -> None:
    """Titles on new sessions: "CH" (a persona menu's pick), "哈咯" (hello) and "(no request recorded)" for a session the
    user started with ``/coderabbit:review`` and no words. A built-in command (``/model``) asks for nothing."""
    s = sess(u("CH"), a("Git flow?"), u("implémente git flow dans mon projet"), a("C'est fait."))
    assert summarise_extractive(s, [], derive_facts(s)).goal == "implémente git flow dans mon projet"
    s = sess(u("哈咯"), a("你好！"), u("claude cli可以自定义url和key吗"), a("可以。"))
    assert summarise_extractive(s, [], derive_facts(s)).goal == "claude cli可以自定义url和key吗"
    s = sess(u("A"), a("ok"))
    assert summarise_extractive(s, [], derive_facts(s)).goal == "A"  # the only ask is still the goal
    s = sess(u("你好"), a("你好！"), u("部署"), a("已部署。"))
    assert summarise_extractive(s, [], derive_facts(s)).goal == "部署"  # two characters can set a task
    run = ("<command-message>coderabbit:review</command-message>\n<command-name>/coderabbit:review</command-name>")
    model = "<command-name>/model</command-name>\n<command-args>sonnet</command-args>"
    s = sess(u(model), u(run), a("Review done: 3 findings fixed."))
    assert summarise_extractive(s, [], derive_facts(s)).goal == "/coderabbit:review"
    s = sess(u(model), a("Set model to sonnet."))
    assert summarise_extractive(s, [], derive_facts(s)).goal == "(no request recorded)"


def test_a_step_narrated_while_under_way_is_no_report_of_what_was_done() -> None:
    """Codex narrates its steps ("I'm installing the QA dependency set now so I can decide…"): a blind set's phase
    account opened with three such lines. What it reports done (past tense) stays."""
    s = sess(u("Add a smoke test for the report page"),
             a("I’m installing the QA dependency set now so I can decide whether a real smoke run is feasible."),
             a("I’m stopping the temporary Streamlit server now and then I'll write the test."),
             a("I added `tests/smoke_report.py` and it passes against the fixture."),
             a("Done: the smoke test passes."))
    text = summarise_extractive(s, [], derive_facts(s)).phases[-1].done
    assert "I added `tests/smoke_report.py`" in text and "installing" not in text and "stopping" not in text


def test_hard_wrapped_lines_hedges_and_pointers_make_no_broken_or_empty_decisions() -> None:
    """A pasted spec wrapped at 80 columns cut a choice mid-sentence ("…with no OZ inheritance to"); "I could explore…"
    hedges and "Let me work with that instead" names nothing a reader could follow."""
    spec = ("Build the contract.\n\nRecommendation: keep Vault.sol self-contained with no inheritance to\n"
            "avoid bytecode size limits.\n\n- a) first item\n- b) second item")
    s = sess(u(spec), a("I could explore using a REST endpoint to avoid the global configuration.\n\n"
                        "Let me work with that instead — it has a different plugin system.\n\n"
                        "Let me set up the frontend by hand instead."))
    assert [d.choice for d in summarise_extractive(s, [], derive_facts(s)).decisions] == [
        "Recommendation: keep Vault.sol self-contained with no inheritance to avoid bytecode size limits.",
        "Let me set up the frontend by hand instead."]


def test_a_change_or_an_act_with_its_reason_joined_by_so_or_since_is_a_decision() -> None:
    """"<cause>, so I <act>", "Since <cause>, I'll <act>" and "<Changed> X so <effect>" state a choice and its reason;
    "so I'll proceed", "so I'm starting the server" and "I'm thinking of…" narrate the work. "优先加载/强制使用" choose."""
    reply = ("The config file was empty, so I ran the import as a standalone script.\n\n"
             "Since this is a Vite app (not Next.js), I'll write the hooks for that stack.\n\n"
             "Relaxed the schema check so any non-empty model name is accepted.\n\n"
             "The user gave enough context, so I'll proceed with the review.\n\n"
             "Nothing listens on port 3000, so I’m starting the dev server now.\n\n"
             "Since I can’t read the docs, I’m thinking of running a snippet.\n\n"
             "需要修改代码让它优先加载 `.env.local`。\n\n强制使用 `webdriver-manager` 管理的驱动。")
    s = sess(u("wire the frontend to the new API"), a(reply))
    assert [d.choice for d in summarise_extractive(s, [], derive_facts(s)).decisions] == [
        "The config file was empty, so I ran the import as a standalone script.",
        "Since this is a Vite app (not Next.js), I'll write the hooks for that stack.",
        "Relaxed the schema check so any non-empty model name is accepted.",
        "需要修改代码让它优先加载 `.env.local`。", "强制使用 `webdriver-manager` 管理的驱动。"]


def test_the_answer_an_analysis_gives_in_a_heading_is_its_decision() -> None:
    """A question-and-answer session decides by answering: "## Answer: …" (or "## 结论：…") is what it settled on;
    other headings and a plain "Answer:" in running text are not."""
    reply = ("## Answer: No — the delay comes from the queue, not from the database\n\nDetails follow.\n\n"
             "## Method\n\nI timed each stage.\n\n## 结论：瓶颈在队列，而不是数据库\n\nAnswer: maybe later.")
    s = sess(u("is the database the bottleneck?"), a(reply))
    assert [d.choice for d in summarise_extractive(s, [], derive_facts(s)).decisions] == [
        "Answer: No — the delay comes from the queue, not from the database", "结论：瓶颈在队列，而不是数据库"]


def test_a_failure_word_that_names_a_condition_reports_no_failure() -> None:
    """Class seen on an unseen Cursor export: a change list "回退逻辑 | 查询失败时回退到本地库" (falls back when the
    query fails) read as "the final reply says it could not be done", on a push the user had asked for and got."""
    for text in ("已完成。回退逻辑：向量库查询失败时回退到本地库。", "已完成：远程库连接失败的话使用缓存。",
                 "Done: the client now retries if the upload cannot reach the bucket.",
                 "Fixed. The worker falls back to polling when the socket can't connect."):
        assert _verdict(u("add the fallback"), a(text)).state == "resolved", text
    # a failure the sentence reports as an event, or past a conjunction, still counts
    for text in ("When I ran the build, it couldn't find the module.", "I checked if the port was free but couldn't bind it.",
                 "Done with the config, but the deploy failed to start.", "构建失败，无法启动。"):
        assert _verdict(u("deploy it"), a(text)).state != "resolved", text
    # "当前" (current) is no condition
    assert _verdict(u("部署"), a("已更新配置。当前构建失败。")).state != "resolved"


def test_chinese_claims_say_pushed_merged_implemented_and_resolved_as_english_does() -> None:
    """English claims "pushed", "merged", "implemented", "resolved"; the Chinese replies of an unseen Cursor export
    said "代码已推送到远程仓库" after a push whose output showed the new commit, and claimed nothing."""
    for text in ("## ✅ 代码已推送到远程仓库！", "分支已经合并到 main。", "登录限流已实现。", "问题已解决。", "推送成功。"):
        assert _verdict(u("提交并推送"), a(text)).state == "resolved", text
    # negated or pending, they claim nothing
    for text in ("代码还没有推送成功。", "合并后会推送到远程仓库。", "推送尚未完成。"):
        assert _verdict(u("提交并推送"), a(text)).state != "resolved", text


def test_a_removal_reported_done_is_a_claim_as_an_addition_is() -> None:
    """"Added"/"已添加" claim work done; so do "removed", "deleted", "已删除", "已移除" (an unseen Cursor export ended on
    "## 已删除你标的 3 处" after the user asked to drop three links, and read as no claim at all)."""
    for text in ("## 已删除你标的 3 处", "顶部导航的下载入口已移除。", "I removed the three download links.",
                 "Deleted the unused helpers."):
        assert _verdict(u("把这三处下载删掉"), a(text)).state == "resolved", text
    for text in ("下载入口还没有删除。", "I haven't removed the links yet."):
        assert _verdict(u("把这三处下载删掉"), a(text)).state != "resolved", text


def test_already_done_in_spanish_and_portuguese_is_a_claim() -> None:
    """"Ya generé y apliqué las migraciones" (a blind set's Spanish Codex reply after migrations ran clean) and
    "Já corrigi o import" claim the work done, as "implementé" does; pending or negated, they claim nothing."""
    for text in ("Ya generé y apliqué las migraciones y ejecuté init_data.", "Ya he corregido el login.",
                 "Já corrigi o import do serviço.", "Já atualizamos a configuração."):
        assert _verdict(u("arregla el login"), a(text)).state == "resolved", text
    for text in ("Todavía no generé las migraciones.", "Ainda não corrigi o import.", "¿Ya aplicaste las migraciones?"):
        assert _verdict(u("arregla el login"), a(text)).state != "resolved", text


def test_a_tool_notice_in_the_users_role_is_no_ask_and_not_typed() -> None:
    """VS Code Copilot posts a finished terminal's output as a user message ("[Terminal <id> notification: command
    completed …] Terminal output: …", English); so does Hermes for a background process. In an unseen Chinese
    export five such notices made the session English and the last of them was taken for the user's last ask."""
    from pipeline.facts.turns import _kind, typed_by_user

    notices = ("[Terminal 3ad710f5-ec4c-486e-8461-5d5bf1ebc23f notification: command completed with exit code 1. The "
               "terminal has been cleaned up.]\nTerminal output:\n$ make build\nfatal error: missing dependency file",
               "[IMPORTANT: Background process proc_4c26c00fbcf7 completed (exit code -15).\nCommand: npm run dev\n"
               "Output:\n]")
    for text in notices:
        assert _kind(u(text)) is None and not typed_by_user(u(text)), text[:30]
    s = sess(u("修复插件的构建"), a("已修复构建脚本。"), u(notices[0]), a("我先清理构建目录，再重新构建。"))
    assert derive_facts(s).language == "zh"
    # the last ask is still the user's own, and a user who writes "[Terminal" about a terminal is still asking
    assert _kind(u("[Terminal] output is garbled after the update, fix the encoding")) == "ask"


def test_a_chinese_reply_that_announces_its_next_step_stopped_mid_work() -> None:
    """"我先清理构建目录，再重新执行构建脚本。" ends an unseen Copilot export: the Chinese of "First I'll…"."""
    for text in ("我先在 WSL 里清理构建目录，再重新执行 `build.sh`。", "我马上检查日志。", "我们接着修改配置文件。"):
        v = _verdict(u("修复构建"), a("构建脚本已更新。"), a(text))
        assert v.state == "unresolved" and "mid-work" in v.reason, text
    # a reply that only mentions what was done first is a report, not an announcement
    assert _verdict(u("修复构建"), a("已修复：先清理了构建目录，再重新构建，构建通过。")).state == "resolved"


def test_a_request_for_steps_is_answered_by_the_steps() -> None:
    """"give me steps to do this <the app's message>" asks for instructions, delivered in the reply (an unseen
    Codex session read unknown after answering it with the commands to run)."""
    steps = "Run these:\n\n```bash\ncli config set --url devnet\ncli create-account MINT\n```\n\nThen retry the deposit."
    for ask in ("give me steps to do this Your account has no token account for this mint. Create it first.",
                "walk me through setting up the devnet wallet", "给我配置钱包的具体步骤"):
        v = _verdict(u("add the deposit button"), a("Added the deposit button; the build passes."), u(ask), a(steps))
        assert v.state == "resolved" and "answers" in v.reason, ask
    # still not when the reply sets out to change files, or the ask reports a failure
    assert _verdict(u("give me the steps and apply them"), *_write("w", "src/wallet.ts"), a(steps)).state != "resolved"
    assert _verdict(u("give me steps to fix this error: deposit fails"), a(steps)).state != "resolved"


def test_a_request_for_a_text_is_answered_by_the_text() -> None:
    """"Please write a commit message for these changes" asks for prose the reply delivers, politely or not
    (a dev Copilot session and a trajectory's "Say '…' and nothing else" read unknown)."""
    msg = "```\nrefactor: move the undo module under src/undo\n\n- update import paths\n```"
    for ask in ("Please write a commit message for that and the recent changes.", "draft the PR description",
                "Say 'Hello from the smoke test!' and nothing else.", "帮我写一个提交信息"):
        v = _verdict(u("move the undo module"), a("Moved it. Done."), u(ask), a(msg))
        assert v.state == "resolved" and "text" in v.reason, ask
    # prose that is part of the code is work; so is a text written into a file
    assert _verdict(u("please write a better error message for the parser"), a("```python\nraise ParseError(...)\n```")
                    ).state != "resolved"
    assert _verdict(u("write the release notes"), *_write("w", "docs/RELEASE.md"), a("Wrote them.")).state != "resolved"
    # a text that comes with work: the message alone is not what was asked
    assert _verdict(u("Please write a commit message and push the changes."), a(msg)).state != "resolved"
    assert _verdict(u("写一个提交信息并推送到远程"), a(msg)).state != "resolved"


def test_a_review_of_a_plan_is_answered_by_its_findings() -> None:
    """A dev Codex session: "Review this implementation plan … potential issues"; the review says what the plan
    "cannot represent" and read as "the final reply says it could not be done"."""
    findings = ("**Findings**\n1. The proposed dispatch only supports one non-text input and cannot represent mixed "
                "inputs.\n2. A placeholder string can't serve as the retrieval payload.\n\n**Recommended Shape**\n"
                "Keep `content` as meaningful text and store the media reference separately.")
    ask = "Review this implementation plan for media support. Focus on correctness and potential issues."
    v = _verdict(u(ask), a(findings))
    assert v.state == "resolved" and "review" in v.reason
    assert _verdict(u("评审一下这个缓存方案，看看有什么问题"), a("方案的问题：缓存无法按用户失效。建议加上版本号。")).state == "resolved"
    # the agent's own failure still counts, and a review that also asks for the work is work
    assert _verdict(u(ask), a("I couldn't open the plan file, so this is partial.\n\n" + findings)).state != "resolved"
    assert _verdict(u("Review the migration plan and then implement it."), a(findings)).state != "resolved"
    # outside a review, the same words still report a failure
    assert _verdict(u("add media support"), a("Added the fields, but the dispatch cannot represent mixed inputs.")
                    ).state != "resolved"


def test_failure_words_that_report_no_failure_of_the_work() -> None:
    """Two unseen sessions read "the final reply says it could not be done" and missed their success: a notebook
    answer explaining a chart ("In the cramped scatter you couldn't tell signal from noise", and before it "a single
    linear coefficient can't represent …"), and a smoke test whose bug table quotes the error it fixed
    ("`Cannot read properties of undefined`")."""
    explain = a("Each bar is the middle half of the ratings, the circle the median. In the cramped scatter you couldn't "
                "tell signal from noise; here each price band is one point.")
    v = _verdict(u("how to read that plot? there's a bar and a circle on top of it"), explain)
    assert v.state == "resolved" and "question" in v.reason
    # the agent's own failure, a state now, a rule for the reader: each still reports
    for text in ("I couldn't open the figure, so I can't say.", "You still couldn't log in after the change.",
                 "You can't deploy from this branch yet."):
        assert _verdict(u("how to read that plot?"), a(text)).state != "resolved", text
    # a general statement of what a kind of thing cannot do explains; the work's own subject reports
    work = (u("now run the notebook on the real data"), *_write("w", "analysis.ipynb"), *_shell("c", "exec_count: 1"))
    done = "Done — the notebook is executed and the results are in."
    v = _verdict(*work, a(done + " That is why Pearson misled: a single linear coefficient can't represent a peak."))
    assert v.state == "resolved", v
    assert _verdict(*work, a(done + " But the plotting cell can't find the font.")).state != "resolved"
    assert _verdict(*work, a(done + " Done, but a test cannot connect to the database.")).state != "resolved"
    # a code span quotes the error the work found and fixed; outside it, the reply's own words
    fixed = ("Fixed and pushed.\n\n| # | where | error | fix |\n|---|---|---|---|\n| 2 | `ThreadInbox.tsx:20` | "
             "`Cannot read properties of undefined (reading 'filter')` | read `{threads}` from the API |")
    v = _verdict(*work, a(fixed))
    assert v.state == "resolved", v
    assert _verdict(*work, a(fixed + "\n\nThe inbox still cannot load threads.")).state != "resolved"


def _shell(cid: str, output: str, failed: bool = False, name: str = "PowerShell") -> list[Message]:
    """A shell call as a SpecStory export keeps it: no arguments, the output as the result."""
    return [a("", calls=(ToolCall(id=cid, name=name, arguments={}),)),
            Message(role="tool", tool_call_id=cid, content=("Exit code 1\n" if failed else "") + output
                    + ("\nError: KeyError 'dept'" if failed else ""))]


def test_a_run_whose_output_ends_on_an_error_failed() -> None:
    """An unseen Cursor export (no exit status, only the terminal's text): the last `act` run after the change ended
    "🏁  Job failed / Error: Job 'analyze-and-fix' failed", and the final "🎉 EXCELLENT! … working perfectly" read as
    resolved."""
    ask = u("make the workflow use my personal access token")
    edit = step("e", "search_replace", {"path": ".github/workflows/auto-fix-ci.yml", "old_string": "a", "new_string": "b"},
                "Lines added: 1, lines removed: 1")
    claim = a("🎉 **EXCELLENT!** Fixed: the workflow now reads your PAT and GitHub authentication works.")
    run = "act -j analyze-and-fix\n[job]   ✓ Logged in to github.com\n[job]   ✅  Success - Complete job\n"
    v = _verdict(ask, *edit, *_shell("c", run + "[job] 🏁  Job failed\nError: Job 'analyze-and-fix' failed\n```"), claim)
    assert v.state != "resolved" and "tool fail" in v.reason, v
    for tail in ("npm ERR! code ELIFECYCLE", "Traceback (most recent call last):\nKeyError: 'dept'"):
        assert _verdict(ask, *edit, *_shell("c", run + tail), claim).state != "resolved", tail
    # an error printed on the way that the run got past, and a run whose harness gave its status, are not
    got_past = "act -j analyze-and-fix\nError: connection refused, retrying\n[job] 🏁  Job succeeded"
    assert _verdict(ask, *edit, *_shell("c", got_past), claim).state == "resolved"
    assert _verdict(ask, *edit, *run_ok("c", "Exit code: 0\nOutput:\nError: the old token is ignored"), claim
                    ).state == "resolved"


def run_ok(cid: str, output: str) -> list[Message]:
    return step(cid, "Bash", {"command": "act -j analyze-and-fix"}, output)


def test_an_answer_that_waits_to_make_the_change_it_proposes_is_not_done() -> None:
    """An unseen Spanish Cursor chat: "why does run dev touch the database?" answered with the cause, the code to change
    and "¿Quieres que implemente este cambio?", never answered; the error it explains is still there."""
    ask = u("pero por que esta tratando de hacer algo en la base de datos en el run, que proceso en el run dev esta "
            "tocando la bd?")
    why = ("Ah, el problema está en que `sequelize.sync()` se ejecuta en cada inicio del servidor.\n\n"
           "```javascript:server.js\nawait sequelize.authenticate();\n```\n\n")
    for offer in ("¿Quieres que implemente este cambio?", "Shall I apply these changes?", "要我帮你修改吗？",
                  "Quer que eu aplique essas alterações?"):
        v = _verdict(ask, a(why + offer))
        assert v.state == "unresolved" and "never answered" in v.reason, (offer, v)
    # an offer of something more leaves the answer answered
    for offer in ("Would you like me to explain the migrations too?", "¿Quieres que te explique las migraciones?"):
        assert _verdict(ask, a(why + offer)).state == "resolved", offer


def test_a_reply_that_reports_the_state_the_work_left_claims_it() -> None:
    """An unseen session: "yes, activate it!", an MCP tool answered "Created and activated a new project", and the
    final "Project **olympios** is now active." was no claim at all (unknown, where gold says resolved)."""
    ask = u("yes, activate it!")
    tool = step("t", "mcp__serena__activate_project", {"project": "/work/olympios"},
                '{"result": "Created and activated a new project with name \'olympios\'."}')
    for final in ("Project **olympios** is now active.", "The hooks are now installed in both worktrees."):
        v = _verdict(ask, *tool, a(final))
        assert v.state == "resolved" and "reports the work done" in v.reason, (final, v)
    # a question about the state claims nothing, and a failed call is not undone by the words
    assert _verdict(ask, *tool, a("Is the project now active in your IDE?")).state != "resolved"
    failed = step("t", "mcp__serena__activate_project", {"project": "/work/olympios"}, '{"error": "no such folder"}')
    assert _verdict(ask, *failed, a("Project **olympios** is now active.")).state != "resolved"


def test_a_user_who_says_it_is_working_confirms_it() -> None:
    """Two unseen sessions ended on the user's word: "looks like it's working" (no reply after it) read as an ask
    nobody answered, and "ok. i see the dashboard working well" as a new ask, so neither note said resolved."""
    work = (u("fix the aiosqlite row error"), *step("e", "edit_file", {"path": "app/repo.py"}, "ok"),
            a("Fixed: rows are dicts now. Restart the bot and try /facts."))
    for said in ("looks like it's working", "ok. i see the dashboard working well", "잘 되네요 감사합니다"):
        v = _verdict(*work, u(said))
        assert v.state == "resolved" and "confirmed" in v.reason, (said, v)
    # doubt in the same words takes it back, and a question about it confirms nothing
    for said in ("it's working, but the upload still fails", "is it working now?", "the worker is not working well",
                 "안 돼요"):
        assert _verdict(*work, u(said)).state != "resolved", said


def test_a_completion_word_in_an_announcement_or_a_when_clause_claims_nothing() -> None:
    """Two blind-set sessions read "the final reply reports the work done": a Portuguese reply that only announced its
    next steps ("Vou começar pelo Context7 para documentação actualizada … Deixa-me resolver os IDs") after "Implement
    the plan", and a Chinese how-to whose "提交成功后，再点 Push" (once the commit succeeds, click Push) told the user
    what to do next."""
    plan = u("Implement the plan as specified. Don't stop until you have completed all the to-dos.")
    v = _verdict(plan, a("Vou começar pelo Context7 para documentação actualizada e em paralelo usar o que preciso. "
                         "Deixa-me resolver os IDs das bibliotecas."))
    assert v.state == "unresolved" and "mid-work" in v.reason, v
    ask = u("把改动提交到 GitHub")
    howto = a("按你现在这个界面，这样做：在上面输入框写说明，点「提交」。提交成功后，再点 同步更改 才会上传到 GitHub。")
    assert _verdict(ask, *step("e", "edit_file", {"path": "README.md"}, "ok"), howto).state != "resolved"
    # the same words as a report still claim it
    assert _verdict(ask, *step("p", "Bash", {"command": "git commit -am x && git push"}, "main -> main"),
                    a("提交成功，已推送到 GitHub。")).state == "resolved"


def test_russian_and_korean_reports_claim_and_an_approval_in_korean_approves() -> None:
    """Blind-set successes read as no claim: "Готово, Лиза. Все файлы переименованы и разложены по папкам." after the
    moves ran, and "커밋 완료 (`dd16c98`)." after the user's "좋아 commit 해줘" (good, commit it) on the new icon."""
    moves = (u("да"), *step("m", "Bash", {"command": "mv a.md lessons/01.md"}, ""),
             *step("f", "Bash", {"command": "find lessons -type f"}, "lessons/01.md"))
    v = _verdict(u("разложи файлы по папкам"), a("План готов, начать?"), *moves,
                 a("Готово, Лиза. Все файлы переименованы и разложены по папкам."))
    assert v.state == "resolved" and "reports the work done" in v.reason, v
    assert _verdict(u("разложи файлы"), *moves[1:], a("Файлы ещё не переименованы.")).state != "resolved"
    icon = step("w", "Write", {"file_path": "src/App.tsx", "content": "x"}, "ok")
    commit = step("c", "Bash", {"command": "git commit -am icon"}, "[main dd16c98] Adjust icon")
    v = _verdict(u("아이콘을 다시 만들어줘"), *icon, a("아이콘을 바꿨어요."), u("좋아 commit 해줘"), *commit,
                 a("커밋 완료 (`dd16c98`)."))
    assert v.state == "resolved", v
    # without the user's word on the change, nothing checked the code
    assert _verdict(u("아이콘을 다시 만들고 커밋해줘"), *icon, *commit, a("커밋 완료 (`dd16c98`).")).state == "unknown"


def test_an_edit_the_export_shows_as_an_empty_fence_after_naming_a_source_file_needs_a_check() -> None:
    """A SpecStory export of Cursor keeps each applied edit as an empty fence ("Теперь обновлю SecurityConfig.java:"
    then "```\n```"): no file is named by a tool, so the claim "CORS настройки успешно обновлены" rested on nothing
    checked (a `chmod` ran, no build, no test). Announced by a document's name, the same fence needs no check."""
    search = step("g", "grep_search", {"query": "allowedOrigins"}, "| src/main/java/WebConfig.java | 12 |")
    edit = a("Теперь обновлю SecurityConfig.java:\n\n```\n```\n\nГотово.", calls=search[0].tool_calls)
    chmod = step("c", "run_terminal_cmd", {"command": "chmod +x scripts/test_cors.sh"}, "")
    claim = a("## ✅ CORS настройки успешно обновлены")
    v = _verdict(u("пропиши домены в CORS"), edit, search[1], *chmod, claim, source="specstory")
    assert v.state == "unknown" and "nothing ran after the last change" in v.reason, v
    docs = a("Теперь обновлю changelog.md:\n\n```\n```", calls=search[0].tool_calls)
    assert _verdict(u("пропиши домены в CORS"), docs, search[1], *chmod, claim, source="specstory").state == "resolved"


def test_a_question_answered_from_a_script_the_agent_ran_is_answered() -> None:
    """An unseen analytics session: each question is answered from a script the agent wrote and ran; the last one
    read unknown because a reply on the way said "Let me check the departments first, then build the comparison"."""
    ask = u("Compare the mean and median gap between orders for users who buy fruit vs users who buy wine.")
    plan = a("Let me check the department names first, then build the comparison.")
    answer = a("## Result\n\n| group | mean | median |\n|---|---:|---:|\n| fruit | 10.6 | 7 |\n| wine | 13.6 | 10 |\n\n"
               "Wine-only buyers order less often.")
    v = _verdict(ask, plan, *_shell("c1", "4 fruit\n5 wine"), *_write("w", "gap_by_dept.py"), *_shell("c2", "mean 10.6"),
                 answer)
    assert v.state == "resolved" and "question" in v.reason
    # the script's run failed, or nothing ran after it, or an existing file was changed: no answer to rest on
    assert _verdict(ask, plan, *_write("w", "gap_by_dept.py"), *_shell("c2", "", failed=True), answer).state != "resolved"
    assert _verdict(ask, plan, *_shell("c1", "4 fruit"), *_write("w", "gap_by_dept.py"), answer).state != "resolved"
    edit = [a("", calls=(ToolCall(id="e", name="edit_file", arguments={"path": "src/report.py", "old_string": "a",
                                                                        "new_string": "b"}),)),
            Message(role="tool", tool_call_id="e", content=json.dumps({"success": True}))]
    assert _verdict(ask, plan, *edit, *_shell("c2", "ok"), answer).state != "resolved"
    # a request for work is still work
    assert _verdict(u("add a chart that compares fruit and wine buyers"), plan, *_write("w", "chart.py"),
                    *_shell("c2", "ok"), answer).state != "resolved"


def test_complaints_and_problem_reports_in_the_sessions_own_language() -> None:
    """Unseen Spanish and Turkish sessions say "No funciona la eliminación masiva", "Los botones siguen ahí",
    "hâlâ çok problem var"; only English and Chinese complaints and problem words were known."""
    for ask in ("No funciona el botón de borrar", "Los botones siguen ahí", "ainda não funciona o login",
                "ça ne marche toujours pas", "es geht immer noch nicht", "всё ещё не работает", "hâlâ çalışmıyor"):
        assert _verdict(u("fix the delete button"), a("Fixed it."), u(ask), a("Let me look at the handler again.")
                        ).state == "unresolved", ask
    # a problem asked about as a question is answered by a fix, not by an explanation
    for ask in ("¿Por qué falla el login?", "por que dá erro no login?", "почему ошибка при входе?", "neden çöktü?"):
        assert _verdict(u(ask), a("The session cookie is not sent over plain HTTP.")).state != "resolved", ask
    assert _verdict(u("¿Cómo se configura el puerto?"), a("Con la variable `PORT` en `.env`.")).state == "resolved"


def test_failure_and_next_step_wording_in_the_replies_language() -> None:
    """Replies follow the user: a Spanish, Portuguese or Russian reply that says it could not do it, or that stops on
    its next step, is no answer."""
    for text in ("No se pudo conectar con la base de datos.", "Não pude aplicar a migração.",
                 "Не удалось запустить сервер.", "Derleme başarısız."):
        assert _verdict(u("¿cómo está el despliegue?"), a(text)).state != "resolved", text
    for text in ("Vamos a verificar los commits remotos.", "Vou verificar o arquivo de configuração.",
                 "Давайте проверим логи сервера.", "Lass mich die Logs prüfen."):
        v = _verdict(u("fix the sync"), a("Updated the config."), a(text))
        assert v.state == "unresolved" and "mid-work" in v.reason, text
    # a report that only uses the words is still a report
    assert _verdict(u("¿qué hace vamos.py?"), a("`vamos.py` arranca el servidor.")).state == "resolved"


def test_an_edit_the_harness_could_not_apply_vetoes_the_claim() -> None:
    """aider prints "The LLM did not conform to the edit format" / "SEARCH/REPLACE block failed to match" when the
    reply's edit blocks do not apply: the reply's "Done" then describes an edit that is not on disk."""
    claim = a("I've fixed the low-speed slip in `Wheel.cs`. Done.")  # its edit never applied: no "Applied edit"
    failed = Message(role="system", content="Tokens: 21k sent, 4.7k received.\nThe LLM did not conform to the edit "
                                            "format.\n# 1 SEARCH/REPLACE block failed to match!")
    v = _verdict(u("fix the slip at low speed"), claim, failed)
    assert v.state == "unresolved" and "could not apply" in v.reason
    # a retry that applied is the last word
    retry = [a("Here is the corrected block. Done.", calls=(ToolCall(id="e2", name="aider_apply_edit",
                                                                     arguments={"path": "Wheel.cs"}),)),
             Message(role="tool", tool_call_id="e2", content="Applied edit to Wheel.cs")]
    assert "could not apply" not in _verdict(u("fix the slip at low speed"), claim, failed, *retry).reason


def test_a_codex_turn_the_user_aborted_after_the_claim_is_not_resolved() -> None:
    """Codex writes "<turn_aborted> The user interrupted the previous turn on purpose…" when the user stops a turn;
    like Claude Code's "[Request interrupted by user]", it outranks a claim made before it."""
    aborted = Message(role="system", content="<turn_aborted>\nThe user interrupted the previous turn on purpose. Any "
                                             "running processes may still be running.\n</turn_aborted>")
    start = a("Fixed the vault init; `npm run build` passes. Starting the dev server to check the page.",
              calls=(ToolCall(id="d", name="exec_command", arguments={"cmd": "npm run dev"}),))
    v = _verdict(u("fix the vault init"), start, Message(role="tool", tool_call_id="d", content="aborted by user after 31.2s"),
                 aborted)
    assert v.state == "unresolved" and "harness" in v.reason


def test_a_question_that_also_asks_for_the_work_is_not_answered_by_an_answer() -> None:
    steps = "1. Open the settings.\n2. Set the redirect URL.\n3. Restart the server."
    for ask in ("give me the steps and then apply them", "explain the login flow and then fix the redirect",
                "解释一下登录流程，然后修复跳转"):
        assert _verdict(u(ask), a(steps)).state != "resolved", ask
    assert _verdict(u("explain the login flow"), a(steps)).state == "resolved"


def test_a_symptom_asked_about_is_a_problem_only_a_fix_answers() -> None:
    """"why is the signup page blank?" reports a problem as "why does the build fail?" does; its diagnosis is no fix."""
    for ask in ("now the signup page is blank, why?", "why does the request hang?", "为什么页面白屏？",
                "por que o build quebra?", "why can't it connect to the database?"):
        assert _verdict(u(ask), a("The page imports a module that is missing from the bundle.")).state != "resolved", ask
    assert _verdict(u("why do we use a blank line before returns?"), a("Readability.")).state != "resolved"  # the price
    assert _verdict(u("which port does the server use?"), a("8080.")).state == "resolved"


def test_a_claim_the_reply_says_is_unchecked_is_unknown() -> None:
    for text in ("Fixed the handler. I haven't run the tests yet.", "Done; the migration is untested.",
                 "已修复登录逻辑，还没有测试。"):
        v = _verdict(u("fix the login"), a(text))
        assert v.state == "unknown" and "not checked" in v.reason, text
    assert _verdict(u("fix the login"), a("Fixed the handler; I ran the tests and all pass.")).state == "resolved"


def test_a_question_about_the_works_own_state_is_answered_only_by_its_success() -> None:
    """"did the tests pass?" answered "Not yet; 3 tests are still red" is an answer, and the work is not done."""
    for ask, reply in (("did the tests pass?", "Not yet; 3 tests are still red."),
                       ("what's the status of the deploy?", "The pod keeps restarting with CrashLoopBackOff."),
                       ("部署成功了吗？", "还在重启，日志里是内存不足。")):
        assert _verdict(u("fix the login"), a("Fixed."), u(ask), a(reply)).state != "resolved", ask
    # a success that survives the vetoes still resolves it
    assert _verdict(u("did the tests pass?"), a("Yes: all tests pass (42 passed).")).state == "resolved"


def test_ok_or_done_after_a_step_handed_to_the_user_does_not_close_the_work() -> None:
    """"Run `make migrate` and tell me when it's done." → "done": the user did the step; nobody saw its result."""
    for reply, ack in (("Run `make migrate` and tell me when it's done.", "done"),
                       ("I changed the cookie flag. Please restart the server and try again.", "ok"),
                       ("已修改配置，请刷新页面试试。", "好的")):
        assert _verdict(u("fix the login"), a(reply), u(ack)).state != "resolved", ack
    # a confirmation still closes, and so does an ack of a plain report
    assert _verdict(u("fix the login"), a("Changed the flag. Please restart and try again."), u("perfect, it works")
                    ).state == "resolved"
    assert _verdict(u("fix the login"), a("Fixed: the cookie is secure now, tests pass."), u("ok")).state == "resolved"


def test_a_claim_with_failures_or_parts_left_is_not_resolved() -> None:
    for text in ("Updated the fixtures. 2 tests failed, the rest pass.", "Done, except the settings page, which I skipped.",
                 "Added login. TODO: logout and password reset.", "已完成三个服务的迁移，剩下两个需要凭证。"):
        v = _verdict(u("finish the migration"), a(text))
        assert v.state == "unresolved" and "left" in v.reason, text
    # failures the reply says the work did not cause, and "the rest" of something untouched, leave nothing
    assert _verdict(u("fix the parser"), a("Fixed the parser; its tests pass. 2 failed (unrelated, pre-existing).")
                    ).state == "resolved"
    assert _verdict(u("改一下标题"), a("已更新标题，剩下的代码不变。")).state == "resolved"


def test_a_bare_lead_in_is_not_what_a_phase_reports() -> None:
    """"Here's the deal on randomness:" introduces the report; the sentences after it say what was done."""
    from pipeline.summarize.extractive import done_text

    reply = ("Here's the deal on **randomness**:\n\n**Now:** `crypto.getRandomValues()` pulls from the OS cryptographic "
             "RNG, with rejection sampling so every number is equally likely.\n\nFor Dominion this is overkill.")
    text = done_text([u("is it truly random? add some sfx"), a(reply)], None, "en")
    assert not text.startswith("Here's the deal") and "getRandomValues" in text


def test_the_users_own_confirmation_then_only_questions_is_resolved() -> None:
    """"The results are displayed appropriately … please tell me why it happened and write a report": the user saw the
    work working; what follows asks for words only. Doubt in the confirmation, a new request for work, a complaint or a
    failure after it keep the session open."""
    fix = [u("uploading a real image gives HTTP 500"), a("Patched the vite proxy so /api goes to the backend.")]
    ok = u("The results are displayed appropriately not only on mock mode but also on real images. Please tell me "
           "why it happened. Please make a report so the other branches can fix it.")
    v = _verdict(*fix, ok, a("Root cause: the proxy sent /api to port 5173, which fails with 500. Report below."))
    assert v.state == "resolved" and "confirmed" in v.reason
    assert _verdict(*fix, u("OCRが成功して、結果が表示されました。なぜ壊れていたのですか？"), a("原因はプロキシ設定でした。")).state \
        == "resolved"
    assert _verdict(*fix, u("好了，现在正常了"), u("为什么之前会报错？")).state == "resolved"  # an unanswered why: words
    for later in ([u("It works now. Add a dark mode toggle too.")],  # new work in the same message
                  [u("It works on mock mode but real images still fail.")],  # doubt
                  [u("it works now"), a("Great."), u("it broke again after the restart")],  # a later complaint
                  [u("it works now"), u("why does it still fail the way it did before?")],  # still failing
                  [ok, a("Let me add a test."), *run("t", "pytest", "1 failed", 1)],  # a failure after it
                  [a("请重启服务后再试。"), u("好了")]):  # "done": the user did the step, nobody saw it work
        assert _verdict(*fix, *later).state != "resolved", later[0].content


def test_japanese_claims_and_failures_count_as_english_ones_do() -> None:
    """"ビルドが成功しました" claims, "失敗しました" reports failure, "まだ動きません" complains; "npm run --silent build"
    is a build."""
    assert _verdict(u("型エラーを直して"), a("修正しました。ビルドが成功しました。")).state == "resolved"
    assert _verdict(u("コマンドでプッシュして"), a("`.specstory`ディレクトリをgitコマンドでプッシュしました。")).state == "resolved"
    assert _verdict(u("型エラーを直して"), a("ビルドに失敗しました。")).state != "resolved"
    assert _verdict(u("型エラーを直して"), a("修正しました。"), u("まだ動きません")).state != "resolved"
    from pipeline.facts.endstate import _CHECK

    assert _CHECK.search("Set-Location frontend; npm run --silent build")


def test_what_a_check_cannot_prove_is_no_failure_of_the_work() -> None:
    """"It cannot prove the source didn't stop early" is a limit of the check, stated next to a passing run."""
    reply = "`make test` — all three pass, exit 0. It cannot prove the source didn't stop early; that limit is in DECISIONS.md."
    assert _verdict(u("run make test"), a(reply)).reason != "the final reply says it could not be done"
    assert _verdict(u("deploy it"), a("I cannot reach the server, so nothing was deployed.")).state != "resolved"


def test_an_ask_the_editor_wrote_is_no_evidence_of_the_users_language() -> None:
    """Cursor's Bugbot sends its English finding as the user's message ("Verify this issue exists and fix it: …"):
    still an ask, but a Spanish user's session stays Spanish."""
    bugbot = ("Verify this issue exists and fix it:\nThe handleResizeStart useCallback dependency array is incomplete. "
              "The callback calls getCurrentDimensions() which depends on positions, customWidth and customHeight, so "
              "a stale closure reads old values after the panel is resized by the user more than once.")
    s = sess(u("el carrito se ve solapado en la segunda captura"), a("Lo reviso."), u(bugbot), a("Fixed."),
             u("sigue sin funcionar, aparece en cualquier lado"))
    assert derive_facts(s).language == "es"
    assert user_asks([u(bugbot)])
    # Cursor plan mode's Build button sends its own English ask (a blind set's Portuguese session read as English)
    build = ("Implement the plan as specified, it is attached for your reference. Do NOT edit the plan file itself.\n\n"
             "To-do's from the plan have already been created. Do not create them again. Mark them as in_progress as "
             "you work, starting with the first one. Don't stop until you have completed all the to-dos.")
    s = sess(u("Compreende o conceito e faz um plano inteiro para o transformar num build completo, as paginas "
               "principais ja estao feitas mas precisamos de usar context7 para construir"),
             a("Plano pronto."), u(build), a("Vou começar."))
    assert derive_facts(s).language == "pt"
    assert user_asks([u(build)])


def test_a_contrast_that_draws_a_line_reports_no_problem() -> None:
    """"flags one domain with many identities, but not one identity across domains" says what the check covers;
    "the page loads, but the images are not shown" reports a problem."""
    from pipeline.facts.endstate import reported_problem

    assert reported_problem("`needs_review` flags a domain carrying many identities, but not one identity spanning "
                            "many domains.") is None
    assert reported_problem("The page loads, but the images are not shown.") is not None


def test_behaviour_under_a_condition_reports_no_problem() -> None:
    """A blind set's report of done work: "if both are empty, Liked points you to the starters under Saved" says what
    the page does then; it made a resolved session `unknown`. An unconditional "the list is empty" reports one."""
    from pipeline.facts.endstate import reported_problem

    assert reported_problem("Under Liked, starters only if you have saved items; if both are empty, Liked points you "
                            "to the starters under Saved.") is None
    # ("when it was empty" stays a report: "when I opened the page it was empty" tells what happened)
    assert reported_problem("The liked list is empty after a reload.") is not None
    fix = _tool("e", "Edit", file_path="/home/ana/src/proj/app/saved.tsx", old_string="a", new_string="b")
    done = a("Done: Library sections added. If both lists are empty, Liked points you to the starters. "
             "`npx tsc --noEmit` passes.")
    assert end(u("add liked papers to the library"), *fix, *run("1", "npx tsc --noEmit", "", 0), done) == "resolved"


def test_a_rule_a_prevented_problem_and_a_test_written_to_fail_first_report_no_failure() -> None:
    """Three resolved sessions of a blind set read `unknown`/`unresolved`: a validator's tokens "that should never
    appear in form values" (a rule), a rename that "avoids drift (where the UI says discount but no discount exists)"
    (a problem prevented), "新回归测试（先失败再修复通过）" (a test written to fail first). None reports a failure."""
    from pipeline.facts.endstate import _says_failed, reported_problem

    assert reported_problem("New blacklist: conversational tokens that should never appear in form values.") is None
    assert reported_problem("Renaming the class avoids drift (where the UI says discount but no discount exists).") is None
    assert reported_problem("The tokens never appear in the form values after a reload.") is not None  # a report
    assert not _says_failed("新增回归测试（先失败再修复通过）：tests/header.test.mjs")
    assert _says_failed("回归测试失败：tests/header.test.mjs")


def test_a_zero_count_of_issues_reports_no_problem() -> None:
    """"All tests pass and the linter reports 0 issues." is a clean result; "the linter reports 3 issues" is not."""
    from pipeline.facts.endstate import reported_problem

    assert reported_problem("All tests pass and the linter reports 0 issues.") is None
    assert reported_problem("The linter reports 3 issues in cli.go.") is not None


def test_no_sentence_ends_inside_a_code_span() -> None:
    """A Japanese reply quoted the app's output as code, full stop included ("`assistant / done` が `こんにちは。` だけに
    なります"): cut at that "。", the phase text kept an unclosed span that paired with the next one, and the note quoted
    "こんにちは。 変更したファイル：…" as code the session never showed."""
    from pipeline.facts.turns import _sentences

    reply = "修正しました。 `assistant / done` が `こんにちは。` だけになります。次は `v1.2. x` です. Done!"
    assert _sentences(reply) == ["修正しました。", "`assistant / done` が `こんにちは。` だけになります。",
                                 "次は `v1.2. x` です.", "Done!"]
    assert _sentences("A stray ` here. Then\nthe next line.") == ["A stray ` here. Then", "the next line."]  # lines end
    msgs = [u("「はろー」と入力すると重複して表示されます"), a(reply)]
    note = summarise_extractive(sess(*msgs), [], derive_facts(sess(*msgs)))
    assert "`こんにちは。`" in " ".join(p.done for p in note.phases)


def test_a_review_asked_for_on_top_of_a_passing_check_leaves_the_check_standing() -> None:
    """A blind set's missed success: a UI redesign whose build passed after its last edit ended "UI Redesign Complete.
    Ready for review." The handover is courtesy there: the check is the evidence. With nothing run after the last
    edit, work handed over for a review that never came stays in doubt."""
    ask = u("redesign the dashboard UI with the badminton theme, UI only")
    edit = _tool("e", "Edit", file_path="/home/ana/src/proj/src/components/DashboardNav.tsx", old_string="a",
                 new_string="b")
    build = run("1", "npm run build", "✓ Compiled successfully\n   Linting and checking validity of types ...", 0)
    report = a("Build passed: all 18 routes compile. UI redesign complete. Ready for review.")
    assert end(ask, *edit, *build, report) == "resolved"
    assert end(ask, *edit, report) == "unknown"
    assert end(ask, *build, *edit, report) == "unknown"  # the build ran before the last edit


def test_thanks_in_italian_korean_and_more_close_the_work() -> None:
    """A blind set's missed successes: "a posto grazie" after a home-folder cleanup, "수고 !!" (Korean: good work) after
    a settings sync. Thanks in the languages sessions come in close the work; thanks with a new request do not."""
    work = (u("pulisci la home dalle cartelle inutili"), a("Pulizia completata: 30GB recuperati."))
    for thanks in ("a posto grazie", "수고 !!", "고마워요", "valeu!", "dziękuję", "teşekkürler", "cảm ơn", "bedankt", "дякую"):
        assert end(*work, u(thanks)) == "resolved", thanks
    assert end(*work, u("grazie, ma la cartella .cache è ancora lì")) != "resolved"


def test_a_chat_export_ending_on_an_edit_the_user_never_built_is_not_resolved() -> None:
    """A blind set's false success (VS Code Copilot through SpecStory, no tool rows): the user built each change in
    Xcode and pasted the errors back ("StatsGridView.swift:48:77 Extra argument 'height' in call"); the last reply
    changed the code again (an empty fence: Copilot's applied edit) and said "all cards will be exactly the same size".
    Only the user's next report could say so, and none came. A chat where the user never reported a run is judged as
    before, and so is one the user confirmed."""
    fence = "\n```\n\n```\n"
    build_error = u("error: /Users/ana/app/Views/StatsGridView.swift:48:77: Extra argument 'height' in call")
    fix = a(f"I see the issue! The frame modifier takes no height there. Let me fix it:{fence}Fixed the error.")
    last = a(f"You're absolutely right! Let me make every card the same size:{fence}Now all cards will be exactly "
             "the same size, and the layout is fixed.")
    start = (u("show the stats as a grid of cards"), a(f"I'll add the grid:{fence}Done: the stats grid is added."))
    assert end(*start, build_error, fix, u("cards are not the same size"), last, source="specstory") == "unknown"
    assert end(*start, build_error, fix, u("cards are not the same size"), last, u("works now, thanks"),
               source="specstory") == "resolved"
    assert end(*start, u("cards are not the same size"), last, source="specstory") == "resolved"


def test_a_platform_wrapper_that_quotes_the_request_asks_what_the_user_typed() -> None:
    """An app-builder platform wraps each request in its own German instructions and quotes what the user typed
    ('🔴 LIVE PREVIEW MODE - Der User sieht deine Änderungen in Echtzeit! User-Anfrage: "make the UI look like apple
    iOS" ⚡ WICHTIG: …'). The quote is the ask, and the wrapper is none of the user's language."""
    rules = "⚡ WICHTIG: Der Vite Dev-Server läuft bereits. Ändere die Dateien direkt und deploye danach. " * 3
    wrapper = '🔴 LIVE PREVIEW MODE - Der User sieht deine Änderungen in Echtzeit!\n\nUser-Anfrage: "{}"\n\n' + rules
    msgs = [u(wrapper.format("make the UI look like apple iOS")), a("Done: the dashboard uses the iOS palette now."),
            u(wrapper.format("add a photo upload that fills in the form fields")), a("Done: the upload fills them in.")]
    assert user_asks(msgs, "en") == ["make the UI look like apple iOS", "add a photo upload that fills in the form fields"]
    assert derive_facts(sess(*msgs)).language == "en"


def test_a_shells_own_error_lines_are_pasted_output_not_the_users_words() -> None:
    """A blind set's Portuguese session: "corrija o codigo: root@srv:~# bash desinstalador.sh" then six lines of bash's
    "VARIAVEIS_INSTALACAO: line 5: Pay: command not found". Those lines read as typed English ("line", "command",
    "not", "found") and made the note English; they are the shell's, and the ask is the words before them."""
    errors = "\n".join(f"VARIAVEIS_INSTALACAO: line {n}: Pay: command not found" for n in (5, 8, 5, 8, 5, 8))
    msgs = [u(f"corrija o codigo: root@srv1009663:~# bash desinstalador.sh \n{errors}"),
            a("O problema está no arquivo VARIAVEIS_INSTALACAO: o valor com espaço precisa de aspas. Corrigi o arquivo."),
            u("funcionou, obrigado")]
    assert derive_facts(sess(*msgs)).language == "pt"
    assert split_paste(msgs[0].content) is not None


def test_a_change_and_the_reason_labelled_under_it_are_one_decision() -> None:
    """A Portuguese agent reported each change with its reason on the next line ("**Removido:** `mkdir -p
    /mnt/pnpm-cache;`" then "**Motivo:** O diretório já existirá…"): no sentence held both, and the note listed no
    decision. The change and its labelled reason are one choice with a rationale; a reason alone chooses nothing."""
    from pipeline.summarize.decisions import key_decisions

    report = ("## Alterações Realizadas\n\n### 2. Etapa 15 - Backend deps (linha 926):\n"
              "**Removido:** `mkdir -p /mnt/pnpm-cache;`  \n**Motivo:** O diretório já existirá pela nova etapa.\n\n---\n")
    choices = [d.choice for d in key_decisions([u("corrija a permissão do cache"), a(report)])]
    assert choices == ["Removido: `mkdir -p /mnt/pnpm-cache;` Motivo: O diretório já existirá pela nova etapa."]
    assert key_decisions([u("corrija a permissão do cache"), a(report)])[0].rationale == "O diretório já existirá pela nova etapa."
    english = "**Removed:** the `--legacy-peer-deps` flag\n**Reason:** npm 10 resolves the tree without it."
    assert [d.choice for d in key_decisions([u("fix the install"), a(english)])] == [
        "Removed: the `--legacy-peer-deps` flag Reason: npm 10 resolves the tree without it."]
    assert key_decisions([u("why?"), a("**Motivo:** O diretório já existirá.")]) == []


def _asked(name: str, args: dict[str, Any], answer: str, cid: str = "q1") -> list[Message]:
    return [a("Two things to settle first:", calls=(ToolCall(id=cid, name=name, arguments=args),)),
            Message(role="tool", tool_call_id=cid, content=answer)]


_QUESTIONS = {"questions": [
    {"question": "Which backend should the API use?", "header": "Backend", "id": "backend", "multiSelect": False,
     "options": [{"label": "FastAPI", "description": "Async, and the AI libraries are Python"},
                 {"label": "Express", "description": "One language front and back"},
                 {"label": "Gin", "description": "Fast under load"}]},
    {"question": "Which features do you need?", "header": "Features", "id": "features", "multiSelect": True,
     "options": [{"label": "SSE streaming", "description": "Token by token"},
                 {"label": "History", "description": "Past chats"},
                 {"label": "Login", "description": "Accounts"}]},
]}


def test_the_options_the_user_picked_when_asked_are_decisions() -> None:
    """An agent that asks with options (Claude Code's AskUserQuestion, Codex's request_user_input; SpecStory renders the
    call as text) gets the session's firmest decisions as answers: the option picked, the others turned down, the picked
    option's own description its reason. They were missing from every note that had them; a question left unanswered
    decides nothing."""
    from pipeline.summarize.decisions import key_decisions

    claude = 'User has answered your questions: "Which backend should the API use?"="FastAPI", "Which features do ' \
             'you need?"="SSE streaming, History". You can now continue with the user\'s answers in mind.'
    codex = json.dumps({"answers": {"backend": {"answers": ["FastAPI"]}, "features": {"answers": ["SSE streaming", "History"]}}})
    rendered = ("**Which backend should the API use?**\n\nOptions:\n- **FastAPI** - Async, and the AI libraries are Python\n"
                "- **Express** - One language front and back\n- **Gin** - Fast under load\n\n**Which features do you need?** "
                "_(select multiple)_\n\nOptions:\n- **SSE streaming** - Token by token\n- **History** - Past chats\n"
                "- **Login** - Accounts\n\n\n**Answer:** FastAPI, SSE streaming, History")
    for name, args, answer in (("AskUserQuestion", _QUESTIONS, claude), ("request_user_input", _QUESTIONS, codex),
                               ("AskUserQuestion", {}, rendered)):
        got = key_decisions([u("Plan a chat app with me"), *_asked(name, args, answer), a("Good, planning it now.")])
        assert got == [
            Decision(choice="Which backend should the API use? → FastAPI", rationale="Async, and the AI libraries are Python",
                     rejected=("Express", "Gin")),
            Decision(choice="Which features do you need? → SSE streaming, History", rejected=("Login",)),
        ], name
    refused = "<tool_use_error>InputValidationError: too many options</tool_use_error>"
    assert key_decisions([u("Plan it"), *_asked("AskUserQuestion", _QUESTIONS, refused)]) == []
    assert key_decisions([u("Plan it"), *_asked("AskUserQuestion", {}, rendered.split("\n\n\n**Answer")[0])]) == []
    # an answer typed instead of an option is the choice as typed, nothing turned down
    typed = 'User has answered your questions: "Which backend should the API use?"="Whatever is simplest to host".'
    [only] = key_decisions([u("Plan it"), *_asked("AskUserQuestion", _QUESTIONS, typed)])
    assert only.choice == "Which backend should the API use? → Whatever is simplest to host" and only.rejected == ()


def test_check_that_asks_are_answered_by_what_the_check_finds() -> None:
    """"check that there are no blocking dependencies in tasks.md" after the work (a blind set's spec-kit session) is a
    question in the imperative: the reply "no blocking dependency violations" answers it, and the work stands as the
    spec-kit template's ask left it; the template's own "WRONG" examples are no complaint of the user's. So is "any
    issues left?" in any language. An answer that finds what the user asked to rule out leaves the work in doubt."""
    template = ("\n## User Input\n\n```text\nEdit specs/001/tasks.md: renumber the tasks.\n```\n\n"
                "You **MUST** consider the user input. Examples: WRONG: `T1 setup`, RIGHT: `T001 Setup`.")
    work = [u(template), a("", calls=(ToolCall(id="e1", name="apply_patch", arguments={
        "input": "*** Begin Patch\n*** Update File: specs/001/tasks.md\n@@\n-T1\n+T001\n*** End Patch"}),)),
        Message(role="tool", tool_call_id="e1", content="Success. Updated the following files:\nM specs/001/tasks.md"),
        a("Renumbered the tasks T001–T031 in `specs/001/tasks.md`.")]
    ask = u("check that there are no\nblocking dependencies within the task sequence in tasks.md.")
    clean = a("I reviewed the current `specs/001/tasks.md` sequence and don’t see any blocking dependency violations.")
    assert _verdict(*work, ask, clean).state == "resolved"
    blocked = a("T014 depends on T020, which comes later: that dependency is still broken and blocks US1.")
    assert _verdict(*work, ask, blocked).state != "resolved"
    # a yes/no question whether a problem is left asks, it reports none (a blind set's Turkish spec-kit session)
    for question, none_left in (("var mı bir sorun?", "Hayır, şu anda fark edilen bir sorun yok; görevler uyumlu."),
                                ("any issues left?", "No, the tasks are consistent."),
                                ("还有问题吗？", "没有了，任务顺序一致。")):
        assert _verdict(*work, u(question), a(none_left)).state == "resolved", question
    assert _verdict(*work, u("any issues left?"), blocked).state != "resolved"


def test_an_option_the_user_picks_by_its_label_from_the_agents_own_words_is_a_decision() -> None:
    """spec-kit's clarify step (and agents asking in their own words) offers options as a table or a list and the user
    answers "b": the option's description is the decision, the others turned down, the agent's recommendation its reason
    when that is the one picked ("yes" takes it). A reply longer than a label, a single option and a message with no
    options decide nothing."""
    from pipeline.summarize.decisions import key_decisions

    table = ("## Question 3: Handling repeated failed geocoding attempts\n\n"
             "**Recommended:** Option B — 3 attempts avoids infinite loops while allowing recovery.\n\n"
             "| Option | Description |\n|--------|-------------|\n| A | 2 attempts max |\n| B | 3 attempts max |\n"
             "| C | 5 attempts max |\n| Short | Provide a different short answer (<=5 words) |\n\n"
             "You can reply with the option letter (e.g., “A”), or accept the recommendation by saying “yes”.")
    picked = Decision(choice="Handling repeated failed geocoding attempts → 3 attempts max",
                      rationale="3 attempts avoids infinite loops while allowing recovery.",
                      rejected=("2 attempts max", "5 attempts max"))
    for reply in ("b", "B", "Option B", "yes"):
        assert key_decisions([u("clarify the spec"), a(table), u(reply), a("Recorded.")]) == [picked], reply
    [c] = key_decisions([u("clarify the spec"), a(table), u("c"), a("Recorded.")])
    assert (c.choice, c.rationale) == ("Handling repeated failed geocoding attempts → 5 attempts max", "")
    listed = "你希望数据怎么保存？\n\nA) 本地 SQLite 文件\nB) 远程 PostgreSQL\nC) 只在内存里"
    [z] = key_decisions([u("做个记账工具"), a(listed), u("a"), a("好的")])
    assert z.choice == "你希望数据怎么保存？ → 本地 SQLite 文件" and z.rejected == ("远程 PostgreSQL", "只在内存里")
    assert key_decisions([u("clarify"), a(table), u("b, but make it configurable please"), a("ok")]) == []
    # a heading that names no question puts none before the option
    [h] = key_decisions([u("clarify"), a("## Summary\n\n" + table.split("\n\n", 1)[1]), u("b"), a("Recorded.")])
    assert h.choice == "3 attempts max"
    one = "Options:\nA) keep the cache"  # one option is no choice
    assert key_decisions([u("what now?"), a(one), u("a"), a("Kept.")]) == []
    assert key_decisions([u("deploy it"), a("Deployed to staging."), u("b")]) == []


def test_a_check_that_passed_while_the_users_failure_was_there_does_not_verify_its_fix() -> None:
    """A blind set's false success (Codex): unit tests passed, the user pasted the browser console ("mainApp.js:17
    Uncaught (in promise) ReferenceError: auth is not defined"), the agent patched the file, ran the same unit tests
    (green again: they mock what broke in the browser) and said "Deploy this version and the app should render". The
    console's uncaught exception is a failed run; a command that had passed before it tells nothing of the fix, nor
    does the edit; a check that had not run before (the build) does."""
    def call(cid: str, name: str, args: dict[str, Any]) -> Message:
        return a("", calls=(ToolCall(id=cid, name=name, arguments=args),))

    def out(cid: str, text: str) -> Message:
        return Message(role="tool", tool_call_id=cid, content=text)

    patch = "*** Begin Patch\n*** Update File: web/src/mainApp.js\n@@\n-  auth.currentUser\n+  currentUser\n*** End Patch"
    green = "Exit code: 0\nOutput:\n ✓ tests/unit/grid.state.test.js (3 tests)\n Test Files  7 passed (7)"
    before = [u("Add Google sign-in to the app"), call("p1", "apply_patch", {"input": patch.replace("currentUser", "x")}),
              out("p1", "Success. Updated the following files:\nM web/src/mainApp.js"),
              call("t1", "shell_command", {"command": "cd web; npm test"}), out("t1", green),
              a("Added sign-in; all tests pass (7 suites).")]
    console = u("[app] booting JulesJenga\nmainApp.js:17  Uncaught (in promise) ReferenceError: auth is not defined\n"
                "    at Object.home (mainApp.js:17:15)\n    at showHome (mainApp.js:34:17)")
    fix = [call("p2", "apply_patch", {"input": patch}), out("p2", "Success. Updated the following files:\nM web/src/mainApp.js")]
    claim = a("Fixed the `auth is not defined` runtime: `mainApp.js` keeps a `currentUser` from the auth listener. Tests "
              "remain green. Deploy this version and the app should render without the auth reference error.")
    again = [call("t2", "shell_command", {"command": "cd web;  npm test"}), out("t2", green)]
    v = _verdict(*before, console, *fix, *again, claim)
    assert v.state == "unknown" and "the user showed failed" in v.reason, v
    build = [call("b1", "shell_command", {"command": "cd web; npm run build"}), out("b1", "Exit code: 0\n✓ built in 1.2s")]
    assert _verdict(*before, console, *fix, *build, claim).state == "resolved"


def test_work_an_earlier_round_left_open_that_the_session_never_took_up_keeps_it_from_resolved() -> None:
    """A blind set's false success (Claude Code on Windows): the first round of review fixes closed on "What needs
    Logan's decision: 1. Approve decisions 18–21 …", the user pasted a new batch of findings for another file, and the
    session ended on "All 3 issues fixed". The decisions handed over were never taken up: not resolved. An open item
    the next ask takes up ("approve decisions 18-21") is no longer left open, and the user's confirmation stands."""
    first = [u("Apply the review findings to the vault"), a(
        "## Summary\n\nFixed `David Leroy.md` and renamed the README.\n\n**What needs Logan's decision:**\n"
        "1. Approve or modify decisions 18–21 in DECISIONS.md\n2. Decide whether to extract the persona orientation "
        "section\n")]
    last = [u("Fix the following issues in Troubleshoot Terminal.md: line 17 needs a colon"),
            a("✅ **All 3 issues fixed:** line 17 now ends with a colon.")]
    v = _verdict(*first, *last)
    assert v.state == "unknown" and "earlier reply left work open" in v.reason, v
    took_up = [u("Approve decisions 18-21 and extract the persona orientation section"),
               a("Done: decisions 18–21 approved in DECISIONS.md and the persona orientation section extracted.")]
    assert _verdict(*first, *took_up).state == "resolved"
    assert _verdict(*first, *last, u("it works now, thanks")).state == "resolved"


def test_an_announced_step_made_in_the_same_message_and_a_closed_todo_list_end_no_run_mid_work() -> None:
    """Two blind sets' missed successes (Claude Code app builds): "Build is clean. Deploying now." with the deploy call
    in the same message ("✅ Deployment erfolgreich!"), then only a TodoWrite marking every item completed. The step
    was made and the list closed: judged on its evidence (the build passed after the last change), not "stopped
    mid-work". An item left open, or more work after the announcement, is still a run cut short."""
    def call(cid: str, name: str, args: dict[str, Any], text: str = "") -> Message:
        return a(text, calls=(ToolCall(id=cid, name=name, arguments=args),))

    def out(cid: str, text: str) -> Message:
        return Message(role="tool", tool_call_id=cid, content=text)

    work = [u("Build the dashboard and deploy it"),
            call("w", "Write", {"file_path": "/home/user/app/src/pages/Dashboard.tsx", "content": "x"}),
            out("w", "File created successfully at: /home/user/app/src/pages/Dashboard.tsx"),
            call("b", "Bash", {"command": "npm run build 2>&1"}), out("b", "> tsc -b && vite build\n✓ built in 4.1s"),
            call("d", "mcp__deploy_tools__deploy_to_github", {}, "Build is clean. Deploying now."),
            out("d", "✅ Deployment erfolgreich! Code wurde gepusht.")]

    def todos(*statuses: str) -> list[Message]:
        items = [{"content": f"step {i}", "status": st, "activeForm": "x"} for i, st in enumerate(statuses)]
        return [call("t", "TodoWrite", {"todos": items}), out("t", "Todos have been modified successfully.")]

    assert _verdict(*work, *todos("completed", "completed")).state == "resolved"
    assert _verdict(*work, *todos("completed", "in_progress")).state == "unresolved"
    assert _verdict(*work).state == "unresolved"  # nothing after the announcement: the export may have stopped there
    more = [call("g", "Grep", {"pattern": "TODO"}), out("g", "src/a.ts:3: TODO")]
    assert _verdict(*work, *more).state == "unresolved"


def test_an_item_the_final_report_marks_outstanding_is_work_left() -> None:
    """A blind set's false success (Codex, spec-kit's clarify step): the closing report says "Checklist now fully
    passes", then grades its own coverage "Explicit Out-of-Scope: Outstanding" and offers "to fully close the minor
    outstanding item". An item the report itself marks outstanding is work left: not resolved. "Outstanding" as
    praise leaves the claim alone (as does an offer: "if you want, I can close the outstanding item")."""
    ask = u("C")
    report = a("Captured and applied your answer.\n\n- Updated FR-007 to require joint acceptance\n- Checklist now fully "
               "passes\n\nCoverage summary\n- Functional Scope & Behavior: Clear\n- Explicit Out-of-Scope: Outstanding "
               "(low impact)\n\nSuggested next command: /speckit.plan")
    v = _verdict(u("Clarify the spec"), a("Question 2: who signs off? A, B or C?"), ask, report)
    assert v.state == "unresolved" and "work still left" in v.reason, v
    remains = a("Updated FR-007 and the checklist; all items pass. One outstanding item: the out-of-scope note.")
    assert _verdict(u("Clarify the spec"), ask, remains).state == "unresolved"
    praise = a("Updated FR-007 and the checklist; all items pass. The coverage is outstanding.")
    assert _verdict(u("Clarify the spec"), ask, praise).state == "resolved"


def test_a_generators_report_claims_its_artifact_once_a_command_looked_at_it() -> None:
    """Two blind sets' missed successes (Codex running spec-kit's constitution and BMAD's sprint planning): the
    closing reports say "Codified the governance: established the v1.0.0 constitution" and "Generated
    sprint-status.yaml … Validation passed", after the agent's own checks ran on the written file. Such a report
    claims the work; a document written and never looked at again ("I've generated the tasks file", nothing run
    after the heredoc) rests on the claim alone, and "the generated files" as an adjective claims nothing."""
    write = step("w", "shell_command", {"command": "cat <<'EOF' > specs/001/tasks.md\n# Tasks\n- [ ] T001\nEOF"},
                 "Exit code: 0\nOutput:\n")
    check = step("c", "shell_command", {"command": "rg '\\[' .specify/memory/constitution.md"}, "Exit code: 1\nOutput:\n")
    ask = u("/speckit.tasks")
    report = a("Generated `specs/001/tasks.md`.\n\nTotal tasks: 42. Format validation: all tasks use the checklist format.")
    assert _verdict(ask, *write, *check, report).state == "resolved"
    assert _verdict(ask, *write, report).state == "unknown"
    made = a("Codified the governance: established the full v1.0.0 constitution with five principles.")
    assert _verdict(ask, *write, *check, made).state == "resolved"
    adjective = a("I found the generated test artifacts in the working tree; I will include them in the commit.")
    assert _verdict(ask, *write, *check, adjective).state != "resolved"


def test_a_change_report_after_the_changed_program_ran_and_saved_its_output() -> None:
    """A new set's Codex session: the agent rewrote a script, ran it ("Wrote 54 prompts to prompt_history.md", exit 0)
    and reported "Simplified `export_history.py` into a minimal reader". The run's own output file is what the
    program made, not a change still to check, and a report opening on a change verb claims the work once something
    ran after the change. Without the run, or with the run failing, the claim stays in doubt."""
    ask = u("Let's go back to the version where export_history.py reads from an existing exported-session.jsonl file. "
            "Make it minimal: it only writes the prompt_history.md file.")
    patch = [*step("d", "apply_patch", {"input": "*** Begin Patch\n*** Delete File: export_history.py\n*** End Patch"},
                   "Success. Updated the following files:\nD export_history.py\n"),
             *step("p", "apply_patch", {"input": "*** Begin Patch\n*** Add File: export_history.py\n+import json\n"
                                        "*** End Patch"}, "Success. Updated the following files:\nA export_history.py\n")]
    run = step("r", "shell_command", {"command": "python3 export_history.py 019a"},
               "Exit code: 0\nOutput:\nWrote 54 prompts to prompt_history.md\n")
    report = a("Simplified `export_history.py` into a minimal reader of `exported-session.jsonl`:\n\n"
               "- Parses user/assistant messages and writes `prompt_history.md`.")
    assert _verdict(ask, *patch, *run, report).state == "resolved"
    assert _verdict(ask, *patch, report).state == "unknown"
    broke = step("r", "shell_command", {"command": "python3 export_history.py 019a"},
                 "Exit code: 1\nOutput:\nTraceback (most recent call last):\nKeyError: 'payload'\n")
    assert _verdict(ask, *patch, *broke, report).state != "resolved"


def test_a_swap_to_another_way_is_a_decision() -> None:
    """A new set's Claude Code session: asked whether the roll is truly random, the agent answered "For 'nobody can
    argue it's unfair' territory, I'll swap to `crypto.getRandomValues()` which pulls from the OS cryptographic RNG";
    a swap to something is a choice as a switch to it is. Swapping two items in a list chooses nothing."""
    from pipeline.summarize.decisions import key_decisions

    ask = u("can you add some sfx? also, is it truly random? i need to be able to reason about its randomness")
    got = key_decisions([ask, a("`Math.random()` is a PRNG. For fairness nobody can argue with, I'll swap to "
                                "`crypto.getRandomValues()` which pulls from the OS cryptographic RNG.")])
    assert [d.choice for d in got] == ["For fairness nobody can argue with, I'll swap to `crypto.getRandomValues()` "
                                       "which pulls from the OS cryptographic RNG."]
    assert key_decisions([u("fix the order"), a("I swapped the two rows in the table.")]) == []


def test_a_question_answered_after_the_agent_said_it_could_not_do_the_work() -> None:
    """A new blind set's false success (Codex on Windows, in Chinese): asked to investigate a Unity script, the agent
    said "所以我还没法直接读 `CarticulateDynamicsDirver` 的实现" (it is outside the workspace); the user then asked how to
    change the workspace, and that answer was taken for the session's outcome. The work asked before is still
    undone. When a later reply does the work ("I can read it now: fixed …"), or the agent never said it could not,
    the answered question stands."""
    work = u("Investigate why the character jitters when SetStateQ is commented out in Driver.cs")
    cannot = a("The workspace only holds the bridge files, so I still can't read `Driver.cs`. Send me its path.")
    how = u("How do I change the workspace so you can see it?")
    answer = a("Add a junction to the Unity project: `mklink /J unity ..\\SIGGRAPH2024Unity`, or open a new "
               "session in that folder.")
    v = _verdict(work, cannot, how, answer)
    assert v.state == "unresolved" and "could not do the work" in v.reason, v
    zh = a("当前工作区里还是只有两个桥接文件，所以我还没法直接读 `Driver.cs` 的实现。")
    assert _verdict(work, zh, how, answer).state == "unresolved"
    did = a("I can read it now: fixed the state sync in `Driver.cs`, and the jitter is gone in the replay.")
    assert _verdict(work, cannot, did, how, answer).state != "unresolved"
    assert _verdict(work, a("SetStateQ syncs the whole dynamics state; without it M and h are stale."), how,
                    answer).state == "resolved"


def test_a_claim_that_hands_its_check_to_the_user_is_in_doubt() -> None:
    """A new set's false success (Claude Code, in Chinese): the agent pushed a workflow fix and closed with "请稍等几分钟
    再刷新网页确认。如果 deploy 失败你把报错贴回来"; the user never reported back. A reply that leaves the check of its
    work to the user claims nothing checked; a test or build that passed after the last change still stands."""
    ask = u("网页上没有更新，另外把 Node 20 的 warning 一起修复")
    edit = step("e", "Edit", {"file_path": ".github/workflows/deploy.yml", "old_string": "a", "new_string": "b"},
                "The file .github/workflows/deploy.yml has been updated successfully.")
    push = step("p", "Bash", {"command": "git commit -am fix && git push"}, "[main b36ebae] fix\n  main -> main")
    zh = a("已提交 `b36ebae3` 并推送。两处修复已完成。请稍等几分钟再刷新网页（Ctrl+F5）确认。如果 deploy 失败你把报错贴回来。")
    v = _verdict(ask, *edit, *push, zh)
    assert v.state == "unknown" and v.doubted and "check of its work" in v.reason, v
    en = a("Fixed and pushed. Refresh the page in a few minutes to confirm the new numbers show.")
    assert _verdict(u("the page does not update, fix it"), *edit, *push, en).state == "unknown"
    assert _verdict(ask, *edit, *push, a("已提交 `b36ebae3` 并推送。两处修复已完成。")).state == "resolved"
    built = step("b", "Bash", {"command": "npm run build"}, "Exit code: 0\nbuild ok")
    assert _verdict(ask, *edit, *built, en).state == "resolved"


def test_claude_codes_answer_to_an_unknown_slash_command_is_no_ask() -> None:
    """A new set's Claude Code session ended on the user typing "/export", which that version did not know: Claude
    Code posted "Unknown skill: export" in the user's role, after its local-command caveat. It is the harness's
    answer, not an ask the agent left unanswered."""
    ask = u("Resolve the review comments on PR #341")
    test = step("t", "Bash", {"command": "npm test"}, "PASS tests/app.test.ts\nTests: 6 passed, 6 total")
    done = a("Fixed both findings and pushed 6e248c9; tests pass.")
    caveat = u("<local-command-caveat>Caveat: The messages below were generated by the user while running local "
               "commands. DO NOT respond to these messages or otherwise consider them in your response unless the user "
               "explicitly asks you to.</local-command-caveat>")
    assert _verdict(ask, *test, done, caveat, u("Unknown skill: export")).state == "resolved"
    assert _verdict(ask, *test, done, caveat, u("Unknown command: /exprot")).state == "resolved"


def test_a_new_claim_after_the_user_said_the_fix_did_not_solve_it_needs_a_check() -> None:
    """A new set's false success (a Cursor export): the user wrote "but it does not solve the problem … the dynamic data
    is not updated", the agent changed the template, started the server (no output) and replied "The fix I've
    implemented should resolve the issue". After the user said the last fix did not do it, a claim alone is in doubt;
    a test that passed after the change still decides it."""
    ask = u("but it does not solve the problem. when i switch to real data the dynamic data is not updated")
    edit = step("e", "search_replace", {"path": "app/templates/stats.html", "old_string": "a", "new_string": "b"},
                "The file app/templates/stats.html has been updated.")
    serve = step("s", "run_terminal_cmd", {"command": "python wsgi.py"}, "")
    claim = a("The fix I've implemented should resolve the issue: the update functions now read `currentState`.")
    v = _verdict(u("switch the data source"), a("Done: added the switch."), ask, *edit, *serve, claim)
    assert v.state == "unknown" and v.doubted and "did not do what was asked" in v.reason, v
    tests = step("t", "run_terminal_cmd", {"command": "pytest -q"}, "12 passed in 0.4s")
    assert _verdict(u("switch the data source"), a("Done."), ask, *edit, *tests, claim).state == "resolved"
    # a build says it compiles, not that the behaviour the user saw fail is fixed ("图片拖动后没有归位到中心点，这个还是不行",
    # then "npm run build:manifest" and "所有问题都已修复": a blind set's false success)
    for command in ("npm run build:manifest", "npm run build", "npx tsc --noEmit"):
        build = step("b", "run_terminal_cmd", {"command": command}, "done in 2.1s")
        v = _verdict(u("switch the data source"), a("Done."), ask, *edit, *build, claim)
        assert v.state == "unknown" and "no test checked" in v.reason, (command, v)


def test_a_step_the_user_turned_down_and_the_reply_offers_again_is_undone() -> None:
    """A new set's false success (Claude Code, in Korean): asked to commit and push, the agent ran `git push`; the user
    turned it down, asked to fix the commit's author first, and the final reply said the author was fixed, then
    "푸시도 할까요?" (shall I push too?). The push the user asked for never ran. A push that ran after the turned-down
    one, or a final offer of some other step, leaves the claim as it was."""
    def step(cid: str, command: str, output: str) -> list[Message]:
        return [a("", calls=(ToolCall(id=cid, name="Bash", arguments={"command": command}),)),
                Message(role="tool", tool_call_id=cid, content=output)]

    rejected = ("The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file "
                "edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user.")
    ask = u("커밋 푸시")
    commit = step("c", "git commit -m 'fix: favicon'", "[main 3516334] fix: favicon\n 1 file changed")
    push = step("p", "git push", rejected)
    author = u("git commit author 수정해야됨")
    amend = step("a", "git commit --amend --reset-author --no-edit", "[main 108d054] fix: favicon")
    offer = a("author가 `MINT <m@example.com>`으로 수정되었습니다. 푸시도 할까요?")
    v = _verdict(ask, *commit, *push, u("[Request interrupted by user for tool use]"), author, *amend, offer)
    assert v.state == "unresolved" and "turned down" in v.reason, v
    pushed = step("q", "git push", "To github.com:m/hudy.git\n   3516334..108d054  main -> main")
    assert _verdict(ask, *commit, *push, author, *amend, *pushed, offer).state == "resolved"
    other = a("author가 `MINT <m@example.com>`으로 수정되었습니다. 다른 것도 확인할까요?")
    assert _verdict(ask, *commit, *push, author, *amend, other).state != "unresolved"


def test_the_way_the_agent_proposed_and_the_user_told_it_to_take_is_a_decision() -> None:
    """A blind set's Codex session: "How can I install this initializer as an app in ~/.local/bin?" was answered
    "Use a tiny shim script in `~/.local/bin` that delegates to the existing initializer script" after "I found the
    gap: the repo has the logic in `.mise/scripts/init-project.sh`, but no entrypoint, so …"; the user said "ok do
    it". The way taken is a decision, the agent's finding its reason. A go-ahead to work no question asked a way
    for, or a reply that opens on no proposal, decides nothing here."""
    from pipeline.summarize.decisions import key_decisions

    ask = u("How can I install this project initializer as a proper app in ~/.local/bin/?")
    found = a("I found the gap: the repo has the initializer logic in `.mise/scripts/init-project.sh`, but no "
              "installed entrypoint, so it only runs from the repo.")
    proposal = a("Use a tiny shim script in `~/.local/bin` that delegates to the existing initializer script.\n\n"
                 "```bash\ncat > ~/.local/bin/commonproject <<'EOF'\n#!/usr/bin/env bash\nEOF\n```")
    got = key_decisions([ask, found, proposal, u("ok do it"), a("Done — installed.")])
    assert [d.choice for d in got] == [
        "Use a tiny shim script in `~/.local/bin` that delegates to the existing initializer script."]
    assert "init-project.sh" in got[0].rationale
    assert key_decisions([u("Install the initializer in ~/.local/bin"), found, proposal, u("ok do it")]) == []
    assert key_decisions([ask, found, a("There are two ways; which do you prefer?"), u("ok do it")]) == []
    assert key_decisions([ask, found, proposal, u("ok but why a shim and not pipx?")]) == []


def test_persian_confirmations_and_thanks_and_thanks_for_a_change_nothing_ran() -> None:
    """A blind set's Persian Cursor sessions: "عالی. کارت درسته" ("great, your work is right") confirmed the work and
    went unread; "ممنون" ("thanks") closed a round whose last change, to code, nothing ran. Thanks for an unrun
    change is manners, not a report that it works (in any language); thanks after a round where a command ran
    after the change (a push, a build) still closes the work."""
    edit = step("e", "search_replace", {"path": "construction/settings.py", "old_string": "a", "new_string": "b"},
                "The file construction/settings.py has been updated.")
    push = step("p", "run_terminal_cmd", {"command": "git push"}, "Exit code: 0\n179f94f..e18ec42  main -> main")
    fa_done = a("## ✅ مشکلات امنیتی حل شدند!\n\nمیان‌افزارهای امنیتی دوباره فعال شدند.")
    assert _verdict(u("فونت نمودارها را وزیر کن"), *edit, a("فونت وزیر اضافه شد."), u("عالی. کارت درسته")).state == \
        "resolved"
    v = _verdict(u("آیا الان مشکل امنیتی داریم؟ درستش کن"), *edit, fa_done, u("ممنون"))
    assert v.state == "unknown", v
    assert _verdict(u("fix the security settings"), *edit, a("Done: the middlewares are enabled again."),
                    u("thanks")).state == "unknown"
    assert _verdict(u("fix the settings and push"), *edit, *push, a("Done: fixed and pushed."),
                    u("thanks")).state == "resolved"


def test_a_run_of_the_program_last_changed_checks_it() -> None:
    """A blind set's Japanese Cursor session: the agent wrote `scripts/upload-readme-to-r2.ts`, added an npm script
    for it and ran `npm run upload:readme`, which echoed "> tsx scripts/upload-readme-to-r2.ts" and reported the
    upload done. A run of the very program the last change wrote is a check of it; a run of another program, or a
    run that failed, is not."""
    ask, claim = u("R2のwork20260104/にREADME.mdを配置してください"), a("README.mdをR2にアップロードしました。")
    write = _tool("w", "write", path="scripts/upload-readme-to-r2.ts", content="upload()")
    echoed = "> camera-monitor-app@0.1.0 upload:readme\n> tsx scripts/upload-readme-to-r2.ts\n\n✅ アップロード完了"
    assert end(ask, *write, *run("1", "npm run upload:readme", echoed, 0), claim) == "resolved"
    other = "> camera-monitor-app@0.1.0 sync\n> tsx scripts/sync-bucket.ts\n\n✅ 同期完了"
    assert end(ask, *write, *run("2", "npm run sync", other, 0), claim) == "unknown"
    assert end(ask, *write, *run("3", "npx tsx scripts/upload-readme-to-r2.ts", "Error: no bucket", 1), claim) != \
        "resolved"


def test_advice_under_a_condition_in_chinese_is_no_decision() -> None:
    """A blind set's Chinese Cursor session listed "如需 CUDA 12.1 版 PyTorch（与 README 一致），请改用：" and "若你当前环境是
    较新的 Python，需要升级这些包版本或改用 Python 3.9 虚拟环境" as key decisions: advice to the user under a condition
    ("if you need…", "if your environment…", "please switch to…"), as "If you need X, use Y" is in English."""
    from pipeline.summarize.decisions import key_decisions

    advice = a("依赖已写入 requirements.txt。\n\n如需 CUDA 12.1 版 PyTorch（与 README 一致），请改用：\n\n```bash\npip install "
               "torch==2.1.2\n```\n\n若你当前环境是较新的 Python，需要升级这些包版本或改用 Python 3.9 虚拟环境。")
    assert key_decisions([u("根据代码生成 requirements.txt"), advice]) == []
    firm = a("我决定改用 Python 3.9 虚拟环境，因为 numpy 1.20.3 不支持 3.12。")
    assert [d.choice for d in key_decisions([u("安装依赖"), firm])] == [firm.content]
