"""How model and user text is shown in a repr: its length, never its content."""


def withheld(text: str) -> str:
    return f"<withheld {len(text)} chars>"
