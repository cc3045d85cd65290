; SQLite 3.40.1, the upstream tarball of Debian's source package `sqlite3`
; (3.40.1-2+deb12u2), built by its configure script and Makefile (which make
; the amalgamation with tclsh): speedtest1, SQLite's own benchmark program,
; at --size 2 on an in-memory database; its verification hash is checked
; (its timings are not). configure runs where the tree has no config.status:
; a step that starts from the slot's last build's tree (the warm tree) skips it.
; corpus: language C; domain database; build configure+make; package Debian sqlite3 3.40.1 (upstream tarball); licence blessing (public domain)
((name sqlite) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/sqlite")
 (build ("sh" "-c" "(test -f config.status || ./configure CC=clang --disable-tcl) && make -j2 speedtest1"))
 (run ("./speedtest1" "--size" "2" "--memdb" "--verify" "--nomemstat"))
 (check-output (lines "^Verification Hash"))
 (timeout-s 300) (build-timeout-s 1200) (discovery-cpu-s 20))
