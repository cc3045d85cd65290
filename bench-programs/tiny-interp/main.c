/* tiny-interp: a small stack-machine bytecode interpreter.
 *
 * Usage: ./bench [SCALE]   (default 100)
 *
 * Four programs written in a tiny assembly language are assembled at start-up
 * and run with inputs proportional to SCALE: prime counting by trial division,
 * Fibonacci mod p, Collatz step totals and a GCD sum using call/ret.  Every
 * value the programs emit is folded into the checksum.  Arithmetic wraps
 * through uint64_t so no build can hit undefined behaviour.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    OP_PUSH, OP_LOAD, OP_STORE, OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MOD,
    OP_LT, OP_EQ, OP_JMP, OP_JZ, OP_JNZ, OP_DUP, OP_DROP, OP_SWAP,
    OP_CALL, OP_RET, OP_OUT, OP_HALT, OP_COUNT
};

static const char *const op_names[OP_COUNT] = {
    "push", "load", "store", "add", "sub", "mul", "div", "mod",
    "lt", "eq", "jmp", "jz", "jnz", "dup", "drop", "swap",
    "call", "ret", "out", "halt",
};

typedef struct {
    int32_t op, arg;
} Insn;

#define MAX_CODE 256
#define MAX_LABELS 32
#define STACK 64
#define FRAMES 16
#define LOCALS 16

/* ---------- assembler ---------- */

typedef struct {
    Insn code[MAX_CODE];
    int n;
    int label_at[MAX_LABELS];
    const char *src;
    int err;
} Asm;

static int is_space(char c) { return c == ' ' || c == '\n' || c == '\t'; }

static const char *skip_blank(const char *p) {
    for (;;) {
        while (is_space(*p))
            p++;
        if (*p != ';')
            return p;
        while (*p && *p != '\n')
            p++;
    }
}

/* Copies the next word into buf; returns 0 at end of input. */
static int next_word(Asm *a, char *buf, int cap) {
    const char *p = skip_blank(a->src);
    int len = 0;
    while (*p && !is_space(*p)) {
        if (len + 1 < cap)
            buf[len++] = *p;
        p++;
    }
    buf[len] = 0;
    a->src = p;
    return len > 0;
}

static int parse_int(const char *s, int *err) {
    int neg = *s == '-', v = 0;
    if (neg)
        s++;
    if (!*s)
        *err = 1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') {
            *err = 1;
            return 0;
        }
        v = v * 10 + (*s - '0');
    }
    return neg ? -v : v;
}

static int lookup_op(const char *w) {
    for (int i = 0; i < OP_COUNT; i++)
        if (strcmp(w, op_names[i]) == 0)
            return i;
    return -1;
}

static int has_arg(int op) {
    return op == OP_PUSH || op == OP_LOAD || op == OP_STORE || op == OP_JMP ||
           op == OP_JZ || op == OP_JNZ || op == OP_CALL;
}

static int is_jump(int op) {
    return op == OP_JMP || op == OP_JZ || op == OP_JNZ || op == OP_CALL;
}

/* "=N" binds label N here; jump arguments name labels and are fixed up. */
static int assemble(Asm *a, const char *src) {
    char w[32];
    a->n = 0;
    a->err = 0;
    a->src = src;
    for (int i = 0; i < MAX_LABELS; i++)
        a->label_at[i] = -1;
    while (!a->err && next_word(a, w, sizeof w)) {
        if (w[0] == '=') {
            int l = parse_int(w + 1, &a->err);
            if (l >= 0 && l < MAX_LABELS)
                a->label_at[l] = a->n;
            else
                a->err = 1;
            continue;
        }
        int op = lookup_op(w);
        if (op < 0 || a->n >= MAX_CODE) {
            a->err = 1;
            break;
        }
        Insn in = {op, 0};
        if (has_arg(op)) {
            if (!next_word(a, w, sizeof w))
                a->err = 1;
            in.arg = parse_int(w, &a->err);
        }
        a->code[a->n++] = in;
    }
    for (int i = 0; i < a->n && !a->err; i++) {
        Insn *in = &a->code[i];
        if (!is_jump(in->op))
            continue;
        if (in->arg < 0 || in->arg >= MAX_LABELS || a->label_at[in->arg] < 0)
            a->err = 1;
        else
            in->arg = a->label_at[in->arg];
    }
    return !a->err;
}

/* ---------- virtual machine ---------- */

typedef struct {
    const Insn *code;
    int ncode, pc, sp, fp, halted, fault;
    int64_t stack[STACK];
    int ret_pc[FRAMES];
    int64_t locals[FRAMES][LOCALS];
    uint64_t hash, trace, steps, outputs;
} Vm;

static void vm_fault(Vm *vm) {
    vm->fault = 1;
    vm->halted = 1;
}

static void vm_push(Vm *vm, int64_t v) {
    if (vm->sp >= STACK) {
        vm_fault(vm);
        return;
    }
    vm->stack[vm->sp++] = v;
}

static int64_t vm_pop(Vm *vm) {
    if (vm->sp <= 0) {
        vm_fault(vm);
        return 0;
    }
    return vm->stack[--vm->sp];
}

static int64_t vm_peek(Vm *vm) {
    if (vm->sp <= 0) {
        vm_fault(vm);
        return 0;
    }
    return vm->stack[vm->sp - 1];
}

static int64_t *vm_local(Vm *vm, int slot) {
    static int64_t dummy;
    if (slot < 0 || slot >= LOCALS) {
        vm_fault(vm);
        dummy = 0;
        return &dummy;
    }
    return &vm->locals[vm->fp][slot];
}

static int64_t wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static int64_t wrap_sub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static int64_t wrap_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

/* Division by zero yields 0 and INT64_MIN / -1 wraps, as on a real VM. */
static int64_t safe_div(int64_t a, int64_t b, int want_mod) {
    if (b == 0)
        return 0;
    if (b == -1)
        return want_mod ? 0 : wrap_sub(0, a);
    return want_mod ? a % b : a / b;
}

static int64_t arith(int op, int64_t a, int64_t b) {
    switch (op) {
    case OP_ADD: return wrap_add(a, b);
    case OP_SUB: return wrap_sub(a, b);
    case OP_MUL: return wrap_mul(a, b);
    case OP_DIV: return safe_div(a, b, 0);
    case OP_MOD: return safe_div(a, b, 1);
    case OP_LT: return a < b;
    case OP_EQ: return a == b;
    default: return 0;
    }
}

static void vm_binop(Vm *vm, int op) {
    int64_t b = vm_pop(vm);
    int64_t a = vm_pop(vm);
    vm_push(vm, arith(op, a, b));
}

static void vm_jump(Vm *vm, int target) {
    if (target < 0 || target >= vm->ncode)
        vm_fault(vm);
    else
        vm->pc = target;
}

static void vm_branch(Vm *vm, int target, int if_nonzero) {
    int64_t c = vm_pop(vm);
    if ((c != 0) == if_nonzero)
        vm_jump(vm, target);
}

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h * 0xFF51AFD7ED558CCDull;
}

static void vm_call(Vm *vm, int target) {
    if (vm->fp + 1 >= FRAMES) {
        vm_fault(vm);
        return;
    }
    vm->ret_pc[++vm->fp] = vm->pc;
    memset(vm->locals[vm->fp], 0, sizeof vm->locals[vm->fp]);
    vm_jump(vm, target);
}

static void vm_ret(Vm *vm) {
    if (vm->fp == 0) {
        vm->halted = 1;
        return;
    }
    vm->pc = vm->ret_pc[vm->fp--];
}

static void vm_init(Vm *vm, const Asm *a, int64_t input) {
    memset(vm, 0, sizeof *vm);
    vm->code = a->code;
    vm->ncode = a->n;
    vm->locals[0][0] = input;
}

/* Executes one instruction. */
static void vm_step(Vm *vm) {
    if (vm->pc >= vm->ncode) {
        vm_fault(vm);
        return;
    }
    Insn in = vm->code[vm->pc++];
    vm->steps++;
    switch (in.op) {
    case OP_PUSH: vm_push(vm, in.arg); break;
    case OP_LOAD: vm_push(vm, *vm_local(vm, in.arg)); break;
    case OP_STORE: *vm_local(vm, in.arg) = vm_pop(vm); break;
    /* One call per opcode: inlining a site specialises arith() on it. */
    case OP_ADD: vm_binop(vm, OP_ADD); break;
    case OP_SUB: vm_binop(vm, OP_SUB); break;
    case OP_MUL: vm_binop(vm, OP_MUL); break;
    case OP_DIV: vm_binop(vm, OP_DIV); break;
    case OP_MOD: vm_binop(vm, OP_MOD); break;
    case OP_LT: vm_binop(vm, OP_LT); break;
    case OP_EQ: vm_binop(vm, OP_EQ); break;
    case OP_JMP: vm_jump(vm, in.arg); break;
    case OP_JZ: vm_branch(vm, in.arg, 0); break;
    case OP_JNZ: vm_branch(vm, in.arg, 1); break;
    case OP_DUP: vm_push(vm, vm_peek(vm)); break;
    case OP_DROP: vm_pop(vm); break;
    case OP_SWAP: {
        int64_t b = vm_pop(vm), a = vm_pop(vm);
        vm_push(vm, b);
        vm_push(vm, a);
        break;
    }
    case OP_CALL: vm_call(vm, in.arg); break;
    case OP_RET: vm_ret(vm); break;
    case OP_OUT:
        vm->hash = mix(vm->hash, (uint64_t)vm_pop(vm));
        vm->outputs++;
        break;
    default: vm->halted = 1; break;
    }
}

static void vm_run(Vm *vm) {
    while (!vm->halted)
        vm_step(vm);
}

/* Start-up phase with tracing: folds (pc, sp, top of stack) into the trace
 * hash before each instruction, as a debugger or tracing JIT would. */
static void vm_run_traced(Vm *vm, int max_steps) {
    for (int i = 0; i < max_steps && !vm->halted; i++) {
        int64_t top = vm->sp > 0 ? vm->stack[vm->sp - 1] : 0;
        vm->trace = mix(vm->trace, (uint64_t)vm->pc << 40 ^ (uint64_t)vm->sp << 32 ^ (uint32_t)top);
        vm_step(vm);
    }
}

/* ---------- programs (local 0 holds the input) ---------- */

/* Count primes below N; emit every 64th prime and the count. */
static const char prog_primes[] =
    "push 2 store 1 push 0 store 3\n"
    "=1 load 1 load 0 lt jz 9\n"
    "   push 1 store 4 push 2 store 2\n"
    "=2 load 1 load 2 load 2 mul lt jnz 3 ; j*j > i: prime\n"
    "   load 1 load 2 mod jnz 4\n"
    "   push 0 store 4 jmp 3\n"
    "=4 load 2 push 1 add store 2 jmp 2\n"
    "=3 load 4 jz 5 load 3 push 1 add dup store 3\n"
    "   push 64 mod jnz 5 load 1 out\n"
    "=5 load 1 push 1 add store 1 jmp 1\n"
    "=9 load 3 out halt\n";

/* N steps of Fibonacci mod 1000003, emitting every 1000th term. */
static const char prog_fib[] =
    "push 0 store 1 push 1 store 2 push 0 store 3\n"
    "=1 load 3 load 0 lt jz 9\n"
    "   load 1 load 2 add push 1000003 mod load 2 store 1 store 2\n"
    "   load 3 push 1 add dup store 3 push 1000 mod jnz 1\n"
    "   load 2 out jmp 1\n"
    "=9 load 1 out halt\n";

/* Sum of Collatz stopping times for 1..N/8. */
static const char prog_collatz[] =
    "push 1 store 1 push 0 store 4 load 0 push 8 div store 0\n"
    "=1 load 1 load 0 lt jz 9\n"
    "   load 1 store 2\n"
    "=2 load 2 push 1 eq jnz 3\n"
    "   load 4 push 1 add store 4\n"
    "   load 2 push 2 mod jz 4\n"
    "   load 2 push 3 mul push 1 add store 2 jmp 2\n"
    "=4 load 2 push 2 div store 2 jmp 2\n"
    "=3 load 1 push 1 add store 1 jmp 1\n"
    "=9 load 4 out halt\n";

/* Sum of gcd(i, j) over 1 <= i < N/16, 1 <= j < 24, via a subroutine
 * (label 7) that has its own locals frame. */
static const char prog_gcd[] =
    "push 0 store 3 push 1 store 1 load 0 push 16 div store 0\n"
    "=1 load 1 load 0 lt jz 9\n"
    "   push 1 store 2\n"
    "=2 load 2 push 24 lt jz 3\n"
    "   load 1 load 2 call 7 load 3 add store 3\n"
    "   load 2 push 1 add store 2 jmp 2\n"
    "=3 load 3 out load 1 push 1 add store 1 jmp 1\n"
    "=9 load 3 out halt\n"
    "=7 store 2 store 1\n"
    "=8 load 2 jz 6 load 1 load 2 mod load 2 store 1 store 2 jmp 8\n"
    "=6 load 1 ret\n";

static uint64_t run_program(const char *src, int64_t input, uint64_t h) {
    static Asm a;
    Vm vm;
    if (!assemble(&a, src)) {
        printf("assembly error\n");
        exit(1);
    }
    vm_init(&vm, &a, input);
    vm_run_traced(&vm, 2000);
    vm_run(&vm);
    if (vm.fault) {
        printf("vm fault at pc %d\n", vm.pc);
        exit(1);
    }
    printf("steps: %llu outputs: %llu\n", (unsigned long long)vm.steps,
           (unsigned long long)vm.outputs);
    return mix(mix(mix(h, vm.hash), vm.trace), vm.steps);
}

int main(int argc, char **argv) {
    long scale = argc > 1 ? strtol(argv[1], NULL, 10) : 100;
    if (scale < 1)
        scale = 1;
    uint64_t h = 0x5EED;
    h = run_program(prog_primes, 1000 * scale, h);
    h = run_program(prog_fib, 10000 * scale, h);
    h = run_program(prog_collatz, 1000 * scale, h);
    h = run_program(prog_gcd, 1000 * scale, h);
    printf("checksum: %016llx\n", (unsigned long long)h);
    return 0;
}
