"""The README's Python snippets ("Point your agent at it"), as the code the client suite runs.

Each snippet is the ```python block after a bold label; it is run unchanged except that the
README's placeholder gateway address becomes the gateway under test, with MODEL bound.
"""

import re
from pathlib import Path

SECTION = "## Point your agent at it"
PLACEHOLDER_URL = "http://warmroute:8080/v1"
# Label in the README -> the name the suite gives that client.
LABELS = {
    "OpenAI SDK, Python": "openai-sdk",
    "OpenAI SDK, Python, one client for every call": "openai-sdk-shared",
    "LiveKit Agents, Python": "livekit",
    "Pipecat": "pipecat",
}

_LABEL = re.compile(r"^\*\*([^*]+)\*\*", re.M)
_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.M | re.S)


def readme_snippets(readme: Path) -> dict[str, str]:
    """Each client's snippet, by the suite's name for it. Raises when one is missing."""
    text = readme.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    section = text[start : end if end != -1 else len(text)]
    found: dict[str, str] = {}
    labels = list(_LABEL.finditer(section))
    for i, label in enumerate(labels):
        # A label's block is the first one before the next label.
        until = labels[i + 1].start() if i + 1 < len(labels) else len(section)
        block = _PYTHON_BLOCK.search(section, label.end(), until)
        name = LABELS.get(label.group(1).strip())
        if name is not None and block is not None:
            found[name] = block.group(1)
    missing = sorted(set(LABELS.values()) - set(found))
    if missing:
        raise LookupError(f"README section {SECTION!r} has no python block for {missing}")
    return found


def load_snippet(code: str, *, name: str, base_url: str, model: str) -> dict:
    """Runs one snippet as a module of its own and returns its namespace."""
    if PLACEHOLDER_URL not in code:
        raise ValueError(f"the {name} snippet does not point at {PLACEHOLDER_URL}")
    namespace: dict = {"__name__": f"readme_{name.replace('-', '_')}", "MODEL": model}
    exec(compile(code.replace(PLACEHOLDER_URL, base_url), f"README.md:{name}", "exec"), namespace)
    return namespace


def key_sources(code: str) -> list[str]:
    """Where a snippet puts the session key, named as the gateway's access line names the source."""
    run = "\n".join(line for line in code.split("\n") if not line.lstrip().startswith("#"))
    headers = re.findall(r'"(x-session-id|x-session-affinity)"\s*:\s*call_id', run)
    fields = re.findall(r"\b(prompt_cache_key|session_id)\s*=\s*call_id", run)
    return sorted({f"header:{h}" for h in headers} | {f"body:{f}" for f in fields})
