    ((name lua) (kind llvm-inline) (compiler clang) (sources "@REAL@/lua")
     (build ("make" "-C" "src" "linux-noreadline" "CC=clang" "MYCFLAGS=-g"))
     (run ("./src/lua" "-e" "local t = {} for i = 1, 20000 do t[i] = i * i end local s = 0 for _, v in ipairs(t) do s = s + v % 7 end print(s)"))
     (timeout-s 60) (build-timeout-s 1200))
