"""Shell completion for ``gantt``: a bash script written from the argparse tree itself, so that it names every
command, option and choice the parser has and cannot drift from it. zsh loads the same script through its
``bashcompinit``.
"""

from __future__ import annotations

import argparse
import shlex


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _words(values: list[str]) -> str:
    return shlex.quote(" ".join(values))


def bash_script(parser: argparse.ArgumentParser, prog: str = "gantt") -> str:
    commands = _subparsers(parser)
    top = [*commands, *(o for a in parser._actions for o in a.option_strings)]
    cases = []
    choices = []
    for name, sub in commands.items():
        options = [o for a in sub._actions for o in a.option_strings]
        positional = [str(c) for a in sub._actions if not a.option_strings and a.choices for c in a.choices]
        cases.append(f"        {shlex.quote(name)}) opts={_words(options)}; words={_words(positional)} ;;")
        for action in sub._actions:
            if action.option_strings and action.choices:
                pattern = "|".join(shlex.quote(f"{name} {o}") for o in action.option_strings)
                values = _words([str(c) for c in action.choices])
                choices.append(f"        {pattern}) COMPREPLY=($(compgen -W {values} -- \"$cur\")); return 0 ;;")
    function = f"_{prog.replace('-', '_')}_complete"
    return "\n".join([
        f"# {prog} shell completion (bash; zsh loads it through bashcompinit)",
        f"{function}() {{",
        "    local cur prev cmd opts words",
        '    cur="${COMP_WORDS[COMP_CWORD]}"',
        '    prev="${COMP_WORDS[COMP_CWORD-1]}"',
        "    COMPREPLY=()",
        '    if [ "$COMP_CWORD" -eq 1 ]; then',
        f'        COMPREPLY=($(compgen -W {_words(top)} -- "$cur"))',
        "        return 0",
        "    fi",
        '    cmd="${COMP_WORDS[1]}"',
        '    case "$cmd $prev" in',
        *choices,
        "    esac",
        '    case "$cmd" in',
        *cases,
        "        *) return 0 ;;",
        "    esac",
        '    if [[ "$cur" == -* ]]; then',
        '        COMPREPLY=($(compgen -W "$opts" -- "$cur"))',
        "    else",
        '        COMPREPLY=($(compgen -W "$words" -- "$cur"))',
        "    fi",
        "    return 0",
        "}",
        f"complete -F {function} {prog}",
        "",
    ])


def zsh_script(parser: argparse.ArgumentParser, prog: str = "gantt") -> str:
    return "\n".join(["# zsh: bash-style completion through bashcompinit",
                      "autoload -U +X compinit && compinit",
                      "autoload -U +X bashcompinit && bashcompinit",
                      bash_script(parser, prog)])
