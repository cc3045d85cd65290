# Sourced by the scripts that write config files: the files' text lives in scripts/lib/templates/
# (one language per file, no heredocs), with @NAME@ where a value goes.

# render TEMPLATE NAME=VALUE...: prints TEMPLATE with each @NAME@ replaced by VALUE, byte for
# byte otherwise; fails, naming TEMPLATE and the placeholder, on an @NAME@ no argument gives.
# One pass from left to right, by prefix and suffix removal: a VALUE is never searched for
# placeholders, and no ${var//pat/rep} (bash 5.2's patsub_replacement reads `&` in rep).
render() {
    local template=$1 text out="" arg name
    local -A value=()
    shift
    for arg; do value[${arg%%=*}]=${arg#*=}; done
    [[ -f $template ]] || { echo "render: no template $template" >&2; return 1; }
    # read -d '' keeps trailing newlines, which $(<file) would strip; it fails at the end.
    IFS= read -r -d '' text <"$template" || true
    while [[ $text =~ @([A-Z0-9_]+)@ ]]; do
        name=${BASH_REMATCH[1]}
        [[ -v value[$name] ]] || { echo "render: $template: no value for @$name@" >&2; return 1; }
        out+=${text%%"${BASH_REMATCH[0]}"*}${value[$name]}
        text=${text#*"${BASH_REMATCH[0]}"}
    done
    printf '%s' "$out$text"
}
