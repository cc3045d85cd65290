touch running
case ${3:-} in
    hang) sh -c 'sleep 120; :' "$2-hang" ;;
    daemon) (setsid sh -c 'sleep 120; :' "$2-daemon" </dev/null >/dev/null 2>&1 &) ;;
    kill) kill -KILL "$PPID"; sleep 5 ;;
    loud) printf 'red \033[31mRED\033]52;c;aGVsbG8=\007 bell\007 csi \302\2332J\n' >&2; exit 3 ;;
esac
sleep "$1"
rm -f running
