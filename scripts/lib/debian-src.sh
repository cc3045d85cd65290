# Sourced by the fetch scripts: Debian source packages through apt-get source.

# debian_src_setup: apt-get source needs a deb-src entry for the configured
# mirror and suites, and dpkg-source to unpack; adds them when missing.
debian_src_setup() {
    local SUDO="" src uris suites
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    if ! grep -rqs '^Types: deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
        src=/etc/apt/sources.list.d/debian.sources
        uris=$(awk '/^URIs:/ {print $2; exit}' "$src" 2>/dev/null || true)
        suites=$(awk '/^Suites:/ {$1=""; print; exit}' "$src" 2>/dev/null || true)
        printf 'Types: deb-src\nURIs: %s\nSuites:%s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
            "${uris:-http://deb.debian.org/debian}" "${suites:- bookworm bookworm-updates}" |
            $SUDO tee /etc/apt/sources.list.d/kiln-deb-src.sources >/dev/null
        $SUDO apt-get update -qq
    fi
    command -v dpkg-source >/dev/null || { echo "kiln: installing dpkg-dev" >&2; $SUDO apt-get install -y -qq dpkg-dev >/dev/null; }
}
