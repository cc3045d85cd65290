"""kiln decision files as the policies here write them."""

FLIP = {"inline": "no-inline", "no-inline": "inline"}


def quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def decision_file(writer: str, benchmark: str, values) -> str:
    """The decision file of `benchmark` setting each (site, value) of `values`;
    `writer` names the program that wrote it in its first line."""
    lines = [f";; kiln decision file, written by {writer}", "(decisions",
             f"  (benchmark {benchmark})", "  (values"]
    lines.extend(f"    ({quoted(site)} {value})" for site, value in values)
    lines[-1] += "))"
    return "\n".join(lines) + "\n"
