/* space.c — search spaces in a sandboxed Lua 5.4 state (docs/search-spaces.md). */
#include "space.h"

#include <ctype.h>
#include <pthread.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "registry.h"

/* A byte count a space computes past this is its arithmetic gone wrong (more shared memory than
 * the card has is the budget's refusal, with the card's limit). */
#define SPACE_MAX_BYTES (1LL << 40)

#include "sha256.h"

/* A space that runs longer than this many Lua instructions in one call is stopped. */
#define SPACE_INSTRUCTION_LIMIT 50000000

/* The Lua state's allocator: at most SPACE_MEMORY_LIMIT bytes while a space's code runs (a
 * script that builds a string or table without end fails with a memory error instead of taking
 * the host's memory); the C side's own pushes between calls are not limited, and run protected
 * all the same (space_protected), for when the host itself is out of memory. */
#define SPACE_MEMORY_LIMIT ((size_t)256 << 20)

typedef struct space_alloc {
    size_t used;
    int enforce;      /* inside space_pcall_n */
    int host_refused; /* an allocation the host's allocator failed (not the limit) */
} space_alloc;

/* Testing: from the nth Lua allocation on, every one fails as if the host were out of memory
 * (tailor_space_fail_allocations_from; 0: off). */
static long fail_countdown;
static int failing;

struct tailor_space {
    lua_State *L;
    space_alloc alloc;
    int table_ref;          /* the table the script returned */
    int handler_ref;        /* locate_error bound to origin, made at the first call (0: not yet) */
    char name[64];
    char op[64];
    char source[64];
    char origin[1024];
    char lua_text_hash[65];
    int dtypes_mask;        /* bit per tailor_dtype */
    char experimental[256]; /* why the template is not yet trusted; "" when it is */
    int nparams;
    char param_names[TAILOR_SPACE_MAX_PARAMS][48]; /* sorted */
};

/* A byte count the space gave for `what`: refused when negative or past SPACE_MAX_BYTES. */
static tailor_status check_bytes(tailor_ctx *ctx, const tailor_space *s, const char *what,
                                 long long v)
{
    if (v >= 0 && v <= SPACE_MAX_BYTES)
        return TAILOR_OK;
    return tailor_set_error(ctx, TAILOR_ERR_LUA, "search space %s: %s gave %lld bytes", s->origin,
                            what, v);
}

/* ---- sandbox ---------------------------------------------------------------------------- */

static void *limited_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    space_alloc *a = ud;
    size_t old = ptr ? osize : 0; /* without ptr, osize is a type tag */
    if (nsize == 0) {
        free(ptr);
        a->used -= old;
        return NULL;
    }
    if (a->enforce && nsize > old && a->used - old + nsize > SPACE_MEMORY_LIMIT)
        return NULL;
    if (fail_countdown > 0 && --fail_countdown == 0)
        failing = 1;
    void *q = failing ? NULL : realloc(ptr, nsize);
    if (q)
        a->used = a->used - old + nsize;
    else
        a->host_refused = 1;
    return q;
}

void tailor_space_fail_allocations_from(long n)
{
    fail_countdown = n;
    failing = 0;
}

/* t[key] without metamethods: what a space returned is read raw, so that a table with an
 * __index function can neither raise outside a protected call nor loop. Pushes the value and
 * returns its type, as lua_getfield. */
static int raw_getfield(lua_State *L, int idx, const char *key)
{
    idx = lua_absindex(L, idx);
    lua_pushstring(L, key);
    return lua_rawget(L, idx);
}

/* Past the budget every further instruction raises (the count drops to 1 until the next call
 * resets it), so that a space's own pcall cannot catch the error and loop on. No position: the
 * message handler names the space's line. */
static void instruction_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    lua_sethook(L, instruction_hook, LUA_MASKCOUNT, 1);
    lua_pushfstring(L, "search space ran past %d instructions (an endless loop?)",
                    SPACE_INSTRUCTION_LIMIT);
    lua_error(L);
}

static int locked_newindex(lua_State *L)
{
    return luaL_error(L, "assignment to global '%s' (globals are locked in search spaces; use local)",
                      lua_tostring(L, 2));
}

static int locked_index(lua_State *L)
{
    return luaL_error(L, "unknown global '%s'", lua_tostring(L, 2));
}

/* The message handler: the error's one-line message, led by the line of the space's own file it
 * came through when it was raised elsewhere (the space library, a C check) — not a whole
 * traceback, so that the error stays one sentence. Upvalue 1: the space's chunk name. */
static int locate_error(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (!msg)
        msg = "(error object is not a string)";
    const char *chunk = lua_tostring(L, lua_upvalueindex(1));
    lua_Debug ar;
    for (int level = 1; chunk && lua_getstack(L, level, &ar); level++) {
        if (!lua_getinfo(L, "Sl", &ar) || ar.currentline <= 0 || strcmp(ar.source, chunk) != 0)
            continue;
        char where[1200];
        snprintf(where, sizeof where, "%s:%d:", ar.short_src, ar.currentline);
        if (strncmp(msg, where, strlen(where)) != 0) {
            lua_pushfstring(L, "%s:%d: %s", ar.short_src, ar.currentline, msg);
            return 1;
        }
        break;
    }
    lua_pushstring(L, msg);
    return 1;
}

/* setmetatable without __gc: the collector runs finalizers with hooks off, so an endless one
 * could not be stopped. The rest as the base library's. */
static int sandbox_setmetatable(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    int t = lua_type(L, 2);
    luaL_argexpected(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table");
    if (t == LUA_TTABLE) {
        lua_pushstring(L, "__gc");
        if (lua_rawget(L, 2) != LUA_TNIL)
            return luaL_error(L, "__gc metamethods are not allowed in search spaces");
        lua_pop(L, 1);
    }
    if (luaL_getmetafield(L, 1, "__metatable") != LUA_TNIL)
        return luaL_error(L, "cannot change a protected metatable");
    lua_settop(L, 2);
    lua_setmetatable(L, 1);
    return 1;
}

static void open_sandbox(lua_State *L)
{
    luaL_requiref(L, LUA_GNAME, luaopen_base, 1);
    luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1);
    luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1);
    luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1);
    lua_pop(L, 4);
    static const char *const banned[] = {"dofile", "loadfile", "load", "require", "print",
                                         "collectgarbage", "rawset", "rawequal", NULL};
    for (int i = 0; banned[i]; i++) {
        lua_pushnil(L);
        lua_setglobal(L, banned[i]);
    }
    lua_pushcfunction(L, sandbox_setmetatable);
    lua_setglobal(L, "setmetatable");
    /* string.dump could expose bytecode; the pattern functions run in C, where the instruction
     * count cannot stop a pathological pattern */
    static const char *const banned_string[] = {"dump", "find", "match", "gmatch", "gsub", NULL};
    lua_getglobal(L, "string");
    for (int i = 0; banned_string[i]; i++) {
        lua_pushnil(L);
        lua_setfield(L, -2, banned_string[i]);
    }
    lua_pop(L, 1);
}

static void lock_globals(lua_State *L)
{
    lua_pushglobaltable(L);
    lua_newtable(L);
    lua_pushcfunction(L, locked_newindex);
    lua_setfield(L, -2, "__newindex");
    lua_pushcfunction(L, locked_index);
    lua_setfield(L, -2, "__index");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2);
    lua_pop(L, 1);
}

/* Calls the function below nargs arguments on the stack with a traceback, leaving nresults
 * results (nothing on failure). */
static tailor_status space_pcall_n(tailor_ctx *ctx, tailor_space *s, int nargs, int nresults,
                                   const char *what, const char *field)
{
    lua_State *L = s->L;
    char in_field[80]; /* "in 'field'": written only when a message needs it */
    int base = lua_gettop(L) - nargs;
    if (!s->handler_ref) { /* one message handler for every call: the origin does not change */
        lua_pushfstring(L, "@%s", s->origin);
        lua_pushcclosure(L, locate_error, 1);
        s->handler_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->handler_ref);
    lua_insert(L, base);
    lua_sethook(L, instruction_hook, LUA_MASKCOUNT, SPACE_INSTRUCTION_LIMIT); /* count anew */
    s->alloc.enforce = 1;
    s->alloc.host_refused = 0; /* a refusal the allocator's retry got past is forgotten */
    int r = lua_pcall(L, nargs, nresults, base);
    s->alloc.enforce = 0;
    lua_remove(L, base); /* the hook stays: a space's __gc functions may run at any allocation */
    if (r != LUA_OK && field) {
        snprintf(in_field, sizeof in_field, "in '%s'", field);
        what = in_field;
    }
    if (r == LUA_ERRMEM && s->alloc.host_refused) {
        tailor_set_error(ctx, TAILOR_ERR_NOMEM, "search space %s (%s), %s: out of memory",
                         s->name, s->origin, what);
        lua_pop(L, 1);
        return TAILOR_ERR_NOMEM;
    }
    if (r == LUA_ERRMEM) {
        tailor_set_error(ctx, TAILOR_ERR_LUA, "search space %s (%s), %s: past its %zu MB of "
                         "memory", s->name, s->origin, what, SPACE_MEMORY_LIMIT >> 20);
        lua_pop(L, 1);
        return TAILOR_ERR_LUA;
    }
    if (r != LUA_OK) {
        tailor_set_error(ctx, TAILOR_ERR_LUA, "search space %s (%s), %s: %s", s->name, s->origin,
                         what, lua_tostring(L, -1));
        lua_pop(L, 1);
        return TAILOR_ERR_LUA;
    }
    return TAILOR_OK;
}

/* The same with one result. */
static tailor_status space_pcall(tailor_ctx *ctx, tailor_space *s, int nargs, const char *what)
{
    return space_pcall_n(ctx, s, nargs, 1, what, NULL);
}

/* The C side's own work on the state — the sandbox set up, a space's fields read, the shape and
 * device pushed as a call's arguments — allocates too, and a memory error raised outside a
 * protected call makes Lua abort the process. Every entry point that touches the state runs its
 * body through space_protected, so that such an error becomes a status. Such an error unwinds
 * the body at once: a body holds no malloc'd memory across a Lua call (test_space's walk under
 * LeakSanitizer checks it). */
typedef struct protected_body {
    tailor_status (*fn)(void *arg);
    void *arg;
    tailor_status st;
} protected_body;

enum { BODY_STACK = 40 }; /* stack slots a body may use (a C function is promised only 20) */

static int run_protected_body(lua_State *L)
{
    protected_body *b = lua_touserdata(L, 1);
    lua_pop(L, 1);
    luaL_checkstack(L, BODY_STACK, "the C side's work");
    b->st = b->fn(b->arg);
    return 0;
}

static tailor_status space_protected(tailor_ctx *ctx, tailor_space *s, const char *what,
                                     tailor_status (*fn)(void *arg), void *arg)
{
    lua_State *L = s->L;
    int top = lua_gettop(L);
    protected_body b = {fn, arg, TAILOR_OK};
    lua_pushcfunction(L, run_protected_body); /* a light function and a light userdata: */
    lua_pushlightuserdata(L, &b);             /* neither allocates */
    int r = lua_pcall(L, 1, 0, 0);
    if (r == LUA_OK)
        return b.st;
    tailor_status st = r == LUA_ERRMEM
        ? tailor_set_error(ctx, TAILOR_ERR_NOMEM, "search space %s (%s), %s: out of memory",
                           s->name, s->origin, what)
        : tailor_set_error(ctx, TAILOR_ERR_LUA, "search space %s (%s), %s: %s", s->name,
                           s->origin, what, lua_tostring(L, -1));
    lua_settop(L, top);
    return st;
}

/* ---- loading ------------------------------------------------------------------------------ */

static tailor_status field_string(tailor_ctx *ctx, tailor_space *s, const char *field, char *buf,
                                  size_t size)
{
    lua_State *L = s->L;
    raw_getfield(L, -1, field);
    if (!lua_isstring(L, -1)) {
        lua_pop(L, 1);
        return tailor_set_error(ctx, TAILOR_ERR_LUA,
                                "search space %s: field '%s' must be a string", s->origin, field);
    }
    snprintf(buf, size, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
    return TAILOR_OK;
}

static int cmp_str48(const void *a, const void *b) { return strcmp(a, b); }

/* 1 when name can be a -D macro: a C identifier that fits a tailor_define's name. */
static int is_define_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n >= sizeof ((tailor_define *)0)->name ||
        !(isalpha((unsigned char)name[0]) || name[0] == '_'))
        return 0;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)name[i]) || name[i] == '_'))
            return 0;
    return 1;
}

/* `source` names a file beside the space in the template directories, never a path out. */
static tailor_status check_source(tailor_ctx *ctx, const tailor_space *s)
{
    if (s->source[0] && !strchr(s->source, '/') && !strstr(s->source, ".."))
        return TAILOR_OK;
    return tailor_set_error(ctx, TAILOR_ERR_LUA, "search space %s: 'source' must be a file name "
                            "in the template directories (no '/' or '..'), not '%s'", s->origin,
                            s->source);
}

static tailor_status read_header_fields(tailor_ctx *ctx, tailor_space *s)
{
    lua_State *L = s->L;
    tailor_status st;
    if ((st = field_string(ctx, s, "op", s->op, sizeof s->op)) ||
        (st = field_string(ctx, s, "source", s->source, sizeof s->source)) ||
        (st = check_source(ctx, s)))
        return st;
    static const char *const required[] = {"params", "threads", "smem_static", "smem_dynamic",
                                           "grid", "args", NULL};
    for (int i = 0; required[i]; i++) {
        raw_getfield(L, -1, required[i]);
        int missing = lua_isnil(L, -1);
        lua_pop(L, 1);
        if (missing)
            return tailor_set_error(ctx, TAILOR_ERR_LUA,
                                    "search space %s: required field '%s' is missing", s->origin,
                                    required[i]);
    }
    /* experimental: a sentence saying why the template is not yet in the default space */
    raw_getfield(L, -1, "experimental");
    if (lua_type(L, -1) == LUA_TSTRING) {
        snprintf(s->experimental, sizeof s->experimental, "%s", lua_tostring(L, -1));
    } else if (!lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return tailor_set_error(ctx, TAILOR_ERR_LUA,
                                "search space %s: 'experimental' must be a sentence saying why",
                                s->origin);
    }
    lua_pop(L, 1);
    /* dtypes: default both 16-bit floats */
    raw_getfield(L, -1, "dtypes");
    if (lua_isnil(L, -1)) {
        s->dtypes_mask = (1 << TAILOR_DTYPE_F16) | (1 << TAILOR_DTYPE_BF16);
    } else if (lua_istable(L, -1)) {
        for (lua_Integer i = 1; lua_rawgeti(L, -1, i) != LUA_TNIL; i++) {
            tailor_dtype d;
            const char *name = lua_tostring(L, -1);
            if (!name || tailor_dtype_parse(NULL, name, &d) != TAILOR_OK) {
                lua_pop(L, 2);
                return tailor_set_error(ctx, TAILOR_ERR_LUA,
                                        "search space %s: dtypes[%lld] is not fp16/bf16/fp32",
                                        s->origin, (long long)i);
            }
            s->dtypes_mask |= 1 << d;
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    } else {
        lua_pop(L, 1);
        return tailor_set_error(ctx, TAILOR_ERR_LUA, "search space %s: 'dtypes' must be a list",
                                s->origin);
    }
    lua_pop(L, 1);
    /* parameter names, sorted */
    raw_getfield(L, -1, "params");
    if (!lua_istable(L, -1)) {
        lua_pop(L, 1);
        return tailor_set_error(ctx, TAILOR_ERR_LUA, "search space %s: 'params' must be a table",
                                s->origin);
    }
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        if (lua_type(L, -2) != LUA_TSTRING || s->nparams >= TAILOR_SPACE_MAX_PARAMS) {
            lua_pop(L, 3);
            return tailor_set_error(ctx, TAILOR_ERR_LUA,
                                    "search space %s: params keys must be names (at most %d)",
                                    s->origin, TAILOR_SPACE_MAX_PARAMS);
        }
        if (!is_define_name(lua_tostring(L, -2))) {
            st = tailor_set_error(ctx, TAILOR_ERR_LUA, "search space %s: parameter '%s' is not "
                                  "a C identifier of at most 47 characters (it becomes a -D "
                                  "define)", s->origin, lua_tostring(L, -2));
            lua_pop(L, 3);
            return st;
        }
        snprintf(s->param_names[s->nparams++], 48, "%s", lua_tostring(L, -2));
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    qsort(s->param_names, (size_t)s->nparams, sizeof s->param_names[0], cmp_str48);
    return TAILOR_OK;
}

/* The helpers every space sees as the global table `tailor` (templates/include/spacelib.lua,
 * found like a template: TAILOR_TEMPLATE_PATH first, then embedded). */
#define SPACE_LIB "include/spacelib.lua"

/* Loads text as a chunk named after origin (pushing the function); label names it in messages
 * ("search space rmsnorm.lua"). */
static tailor_status load_chunk(tailor_ctx *ctx, tailor_space *s, const char *text, size_t size,
                                const char *origin, const char *label)
{
    char chunkname[1100];
    snprintf(chunkname, sizeof chunkname, "@%s", origin);
    int r = luaL_loadbufferx(s->L, text, size, chunkname, "t");
    if (r == LUA_OK)
        return TAILOR_OK;
    tailor_status st = tailor_set_error(ctx, r == LUA_ERRMEM ? TAILOR_ERR_NOMEM : TAILOR_ERR_LUA,
                                        "%s: %s", label, lua_tostring(s->L, -1));
    lua_pop(s->L, 1);
    return st;
}

/* Runs the chunk load_chunk pushed, leaving on the stack the table it must return. */
static tailor_status run_chunk(tailor_ctx *ctx, tailor_space *s, const char *label,
                               const char *what)
{
    tailor_status st = space_pcall(ctx, s, 0, what);
    if (st)
        return st;
    if (!lua_istable(s->L, -1)) {
        lua_pop(s->L, 1);
        return tailor_set_error(ctx, TAILOR_ERR_LUA, "%s must return a table", label);
    }
    return TAILOR_OK;
}

/* Runs the helper library in L (sandboxed, globals not yet locked) and sets global `tailor`.
 * The file's text is freed before the library runs: a memory error raised by the run (outside
 * the space's own pcall) unwinds past this function. */
static tailor_status open_space_lib(tailor_ctx *ctx, tailor_space *s)
{
    static const char label[] = "search space library " SPACE_LIB;
    tailor_template_file f;
    tailor_status st = tailor_template_read(ctx, SPACE_LIB, &f);
    if (st)
        return st;
    st = load_chunk(ctx, s, f.text, f.size, f.origin, label);
    tailor_template_file_free(&f);
    if (st == TAILOR_OK)
        st = run_chunk(ctx, s, label, "running the space library");
    if (st == TAILOR_OK)
        lua_setglobal(s->L, "tailor");
    return st;
}

typedef struct load_args {
    tailor_ctx *ctx;
    tailor_space *s;
    const char *file, *origin, *text;
    size_t size;
} load_args;

/* The sandbox, the space library, the script run and its fixed fields read (protected). */
static tailor_status load_body(void *arg)
{
    load_args *a = arg;
    tailor_ctx *ctx = a->ctx;
    tailor_space *s = a->s;
    open_sandbox(s->L);
    tailor_status st = open_space_lib(ctx, s);
    if (st)
        return st;
    lock_globals(s->L);
    char label[128];
    snprintf(label, sizeof label, "search space %s", a->file);
    if ((st = load_chunk(ctx, s, a->text, a->size, a->origin, label)) ||
        (st = run_chunk(ctx, s, label, "running the script")))
        return st;
    if ((st = read_header_fields(ctx, s))) {
        lua_pop(s->L, 1);
        return st;
    }
    s->table_ref = luaL_ref(s->L, LUA_REGISTRYINDEX);
    return TAILOR_OK;
}

/* Runs a space's text (`file` is its name, "rmsnorm.lua"; origin where it came from) in a fresh
 * sandboxed state and reads its fixed fields. */
static tailor_status space_from_text(tailor_ctx *ctx, const char *file, const char *origin,
                                     const char *text, size_t size, tailor_space **out)
{
    *out = NULL;
    tailor_space *s = calloc(1, sizeof *s);
    if (!s)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory");
    snprintf(s->name, sizeof s->name, "%.*s", (int)(strlen(file) - 4), file);
    snprintf(s->origin, sizeof s->origin, "%s", origin);
    tailor_sha256_hex(text, size, s->lua_text_hash);
    s->L = lua_newstate(limited_alloc, &s->alloc);
    if (!s->L) {
        free(s);
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory creating a Lua state");
    }
    lua_sethook(s->L, instruction_hook, LUA_MASKCOUNT, SPACE_INSTRUCTION_LIMIT);
    load_args a = {ctx, s, file, origin, text, size};
    tailor_status st = space_protected(ctx, s, "loading", load_body, &a);
    if (st) {
        tailor_space_destroy(s);
        return st;
    }
    *out = s;
    return TAILOR_OK;
}

tailor_status tailor_space_load(tailor_ctx *ctx, const char *name, tailor_space **out)
{
    *out = NULL;
    char file[80];
    size_t n = strlen(name);
    if (n > 4 && strcmp(name + n - 4, ".lua") == 0)
        snprintf(file, sizeof file, "%s", name);
    else
        snprintf(file, sizeof file, "%s.lua", name);
    tailor_template_file f;
    tailor_status st = tailor_template_read(ctx, file, &f);
    if (st)
        return st;
    st = space_from_text(ctx, file, f.origin, f.text, f.size, out);
    tailor_template_file_free(&f);
    return st;
}

void tailor_space_destroy(tailor_space *s)
{
    if (!s)
        return;
    if (s->L) { /* a space's __gc functions run here: bounded like its other code */
        lua_sethook(s->L, instruction_hook, LUA_MASKCOUNT, SPACE_INSTRUCTION_LIMIT);
        s->alloc.enforce = 1;
        lua_close(s->L);
    }
    free(s);
}

const char *tailor_space_name(const tailor_space *s) { return s->name; }
const char *tailor_space_op(const tailor_space *s) { return s->op; }
const char *tailor_space_source(const tailor_space *s) { return s->source; }
const char *tailor_space_origin(const tailor_space *s) { return s->origin; }
int tailor_experimental_on(void)
{
    const char *v = getenv("TAILOR_EXPERIMENTAL");
    return v && *v && strcmp(v, "0") != 0;
}

const char *tailor_space_experimental(const tailor_space *s)
{
    return s->experimental[0] ? s->experimental : NULL;
}
int tailor_space_supports(const tailor_space *s, tailor_dtype dtype)
{
    return (s->dtypes_mask >> dtype) & 1;
}

tailor_status tailor_timing_spacer_check(tailor_ctx *ctx)
{
    const char *v = getenv("TAILOR_TIMING_SPACER");
    if (!v || !*v || strcmp(v, "0") == 0 || strcmp(v, "1") == 0)
        return TAILOR_OK;
    char name[64];
    for (const char *p = v;;) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        int known = 0;
        if (len > 0 && len < sizeof name) {
            memcpy(name, p, len);
            name[len] = 0;
            known = tailor_op_find(name) != NULL;
        }
        if (!known)
            return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                    "TAILOR_TIMING_SPACER='%s': '%.*s' is no op (give 0, 1 or a "
                                    "comma-separated list of op names, e.g. attention_decode,rmsnorm)",
                                    v, (int)len, p);
        if (!end)
            return TAILOR_OK;
        p = end + 1;
    }
}

int tailor_timing_spacer(const char *op)
{
    const char *v = getenv("TAILOR_TIMING_SPACER");
    if (v && (strcmp(v, "0") == 0 || strcmp(v, "1") == 0))
        return v[0] == '1';
    const tailor_op *o = op ? tailor_op_find(op) : NULL;
    return o && (o->spaced_timing || (v && tailor_list_has(v, op)));
}

const char *tailor_timing_method(const char *op)
{
    return tailor_timing_spacer(op) ? TAILOR_TIMING_METHOD_SPACER : TAILOR_TIMING_METHOD;
}

tailor_status tailor_space_hash(tailor_ctx *ctx, const tailor_space *s, char hex[65])
{
    tailor_status st = tailor_timing_spacer_check(ctx); /* the method below reads it */
    if (st)
        return st;
    tailor_sha256 h;
    tailor_sha256_init(&h);
    const char *method = tailor_timing_method(s->op);
    tailor_sha256_update(&h, method, strlen(method) + 1);
    tailor_sha256_update(&h, s->lua_text_hash, 64);
    tailor_template_file f;
    if ((st = tailor_template_read(ctx, s->source, &f)))
        return st;
    tailor_sha256_update(&h, f.text, f.size);
    tailor_template_file_free(&f);
    if ((st = tailor_template_read(ctx, SPACE_LIB, &f)))
        return st;
    tailor_sha256_update(&h, f.text, f.size);
    tailor_template_file_free(&f);
    char **names, **texts;
    int n;
    st = tailor_template_headers(ctx, &names, &texts, &n);
    if (st)
        return st;
    for (int i = 0; i < n; i++) {
        tailor_sha256_update(&h, names[i], strlen(names[i]) + 1);
        tailor_sha256_update(&h, texts[i], strlen(texts[i]));
    }
    tailor_template_headers_free(names, texts, n);
    uint8_t d[32];
    tailor_sha256_final(&h, d);
    tailor_sha256_to_hex(d, hex);
    return TAILOR_OK;
}

/* ---- arguments passed to space functions -------------------------------------------------- */

static void push_shape(lua_State *L, const tailor_shape *shape)
{
    lua_createtable(L, 0, shape->count);
    for (int i = 0; i < shape->count; i++) {
        lua_pushinteger(L, shape->dims[i].value);
        lua_setfield(L, -2, shape->dims[i].key);
    }
}

static void push_device(lua_State *L, const tailor_device_info *d)
{
    lua_createtable(L, 0, 12);
    lua_pushstring(L, d->name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, d->kind == TAILOR_DEVICE_TPU ? "tpu" : "gpu");
    lua_setfield(L, -2, "kind");
    lua_pushinteger(L, d->kind == TAILOR_DEVICE_TPU ? 0 : d->cc_major * 10 + d->cc_minor);
    lua_setfield(L, -2, "sm");
    lua_pushinteger(L, d->sm_count);
    lua_setfield(L, -2, "sm_count");
    lua_pushinteger(L, d->smem_per_block);
    lua_setfield(L, -2, "smem_per_block");
    lua_pushinteger(L, d->smem_per_block_optin);
    lua_setfield(L, -2, "smem_optin");
    lua_pushinteger(L, d->smem_per_sm);
    lua_setfield(L, -2, "smem_per_sm");
    lua_pushinteger(L, d->regs_per_block);
    lua_setfield(L, -2, "regs_per_block");
    lua_pushinteger(L, d->max_threads_per_block);
    lua_setfield(L, -2, "max_threads");
    lua_pushinteger(L, d->l2_bytes);
    lua_setfield(L, -2, "l2_bytes");
}

/* Pushes the config as a Lua table of name -> value (integers where they parse). */
static void push_value(lua_State *L, const char *v)
{
    char *end = NULL;
    long long i = strtoll(v, &end, 10);
    if (*v && end && *end == '\0')
        lua_pushinteger(L, i);
    else if (strcmp(v, "true") == 0)
        lua_pushboolean(L, 1);
    else if (strcmp(v, "false") == 0)
        lua_pushboolean(L, 0);
    else
        lua_pushstring(L, v);
}

static void push_config(lua_State *L, const tailor_config *cfg)
{
    lua_createtable(L, 0, cfg->nparams);
    for (int i = 0; i < cfg->nparams; i++) {
        push_value(L, cfg->params[i].value);
        lua_setfield(L, -2, cfg->params[i].name);
    }
}

typedef struct call_args {
    const tailor_config *cfg; /* NULL: functions of (shape, dtype, device) */
    const tailor_shape *shape;
    tailor_dtype dtype;
    const tailor_device_info *dev;
    const char *purpose;      /* valid's fifth argument: "plan" or "launch" */
} call_args;

/* Pushes field `field` of the space table, called with the args if it is a function. Leaves
 * one value (possibly nil) on the stack. */
static tailor_status get_field(tailor_ctx *ctx, tailor_space *s, const char *field,
                               const call_args *a)
{
    lua_State *L = s->L;
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->table_ref);
    raw_getfield(L, -1, field);
    lua_remove(L, -2);
    if (!lua_isfunction(L, -1))
        return TAILOR_OK;
    int nargs = 0;
    if (a->cfg) {
        push_config(L, a->cfg);
        nargs++;
    }
    push_shape(L, a->shape);
    lua_pushstring(L, tailor_dtype_name(a->dtype));
    push_device(L, a->dev);
    nargs += 3;
    return space_pcall_n(ctx, s, nargs, 1, NULL, field);
}

static tailor_status get_integer(tailor_ctx *ctx, tailor_space *s, const char *field,
                                 const call_args *a, long long *out)
{
    tailor_status st = get_field(ctx, s, field, a);
    if (st)
        return st;
    int isnum = 0;
    lua_Integer v = lua_tointegerx(s->L, -1, &isnum);
    lua_pop(s->L, 1);
    if (!isnum)
        return tailor_set_error(ctx, TAILOR_ERR_LUA, "search space %s: '%s' must give an integer",
                                s->origin, field);
    *out = v;
    return TAILOR_OK;
}

/* Reads a value on the stack top into a define value string. */
static int value_to_string(lua_State *L, int idx, char *buf, size_t size)
{
    switch (lua_type(L, idx)) {
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx))
            snprintf(buf, size, "%lld", (long long)lua_tointeger(L, idx));
        else
            snprintf(buf, size, "%.9g", lua_tonumber(L, idx));
        return 1;
    case LUA_TBOOLEAN: snprintf(buf, size, "%d", lua_toboolean(L, idx)); return 1;
    case LUA_TSTRING: snprintf(buf, size, "%s", lua_tostring(L, idx)); return 1;
    default: return 0;
    }
}

/* src into dst of size bytes (size > 0), cut short to fit: snprintf's "%s" without its
 * formatting, for the hot loops of enumeration and evaluation. */
static void copy_text(char *dst, size_t size, const char *src)
{
    size_t n = strnlen(src, size - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* ---- enumeration --------------------------------------------------------------------------- */

typedef struct enumerate_args {
    tailor_ctx *ctx;
    tailor_space *s;
    const tailor_shape *shape;
    tailor_dtype dtype;
    const tailor_device_info *dev;
    tailor_config **configs;
    int *count;
} enumerate_args;

static tailor_status enumerate_body(void *arg)
{
    const enumerate_args *ea = arg;
    tailor_ctx *ctx = ea->ctx;
    tailor_space *s = ea->s;
    const tailor_shape *shape = ea->shape;
    tailor_dtype dtype = ea->dtype;
    const tailor_device_info *dev = ea->dev;
    tailor_config **configs = ea->configs;
    int *count = ea->count;
    lua_State *L = s->L;
    char values[TAILOR_SPACE_MAX_PARAMS][64][64];
    int nvalues[TAILOR_SPACE_MAX_PARAMS];
    for (int p = 0; p < s->nparams; p++) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, s->table_ref);
        if (raw_getfield(L, -1, "params") != LUA_TTABLE) { /* a space's code replaced it */
            lua_pop(L, 2);
            return tailor_set_error(ctx, TAILOR_ERR_LUA, "search space %s: 'params' must be a "
                                    "table", s->origin);
        }
        raw_getfield(L, -1, s->param_names[p]);
        lua_remove(L, -2);
        lua_remove(L, -2);
        if (lua_isfunction(L, -1)) {
            push_shape(L, shape);
            lua_pushstring(L, tailor_dtype_name(dtype));
            push_device(L, dev);
            char what[80];
            snprintf(what, sizeof what, "in params.%s", s->param_names[p]);
            tailor_status st = space_pcall(ctx, s, 3, what);
            if (st)
                return st;
        }
        if (!lua_istable(L, -1)) {
            lua_pop(L, 1);
            return tailor_set_error(ctx, TAILOR_ERR_LUA,
                                    "search space %s: params.%s must be a list (or a function "
                                    "returning one)",
                                    s->origin, s->param_names[p]);
        }
        nvalues[p] = 0;
        for (lua_Integer i = 1; lua_rawgeti(L, -1, i) != LUA_TNIL; i++) {
            if (nvalues[p] >= 64 || !value_to_string(L, -1, values[p][nvalues[p]], 64)) {
                lua_pop(L, 2);
                return tailor_set_error(ctx, TAILOR_ERR_LUA,
                                        "search space %s: params.%s[%lld] must be a number, "
                                        "boolean or string (at most 64 values)",
                                        s->origin, s->param_names[p], (long long)i);
            }
            nvalues[p]++;
            lua_pop(L, 1);
        }
        lua_pop(L, 2);
        if (nvalues[p] == 0) /* `valid` refuses configurations, with a reason */
            return tailor_set_error(ctx, TAILOR_ERR_LUA,
                                    "search space %s: params.%s gives no values (an empty list)",
                                    s->origin, s->param_names[p]);
    }
    size_t total = 1;
    for (int p = 0; p < s->nparams; p++) {
        total *= (size_t)nvalues[p];
        if (total > 1000000)
            return tailor_set_error(ctx, TAILOR_ERR_LUA,
                                    "search space %s has more than a million configurations",
                                    s->origin);
    }
    tailor_config *list = calloc(total ? total : 1, sizeof *list);
    if (!list)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory enumerating %s", s->name);
    for (size_t idx = 0; idx < total; idx++) {
        size_t rest = idx;
        list[idx].nparams = s->nparams;
        for (int p = s->nparams - 1; p >= 0; p--) {
            size_t v = rest % (size_t)nvalues[p];
            rest /= (size_t)nvalues[p];
            copy_text(list[idx].params[p].name, sizeof list[idx].params[p].name,
                      s->param_names[p]);
            copy_text(list[idx].params[p].value, sizeof list[idx].params[p].value, values[p][v]);
        }
    }
    *configs = list;
    *count = (int)total;
    return TAILOR_OK;
}

tailor_status tailor_space_enumerate(tailor_ctx *ctx, tailor_space *s, const tailor_shape *shape,
                                     tailor_dtype dtype, const tailor_device_info *dev,
                                     tailor_config **configs, int *count)
{
    *configs = NULL;
    *count = 0;
    enumerate_args a = {ctx, s, shape, dtype, dev, configs, count};
    return space_protected(ctx, s, "enumerating", enumerate_body, &a);
}

/* ---- evaluation ---------------------------------------------------------------------------- */

static tailor_status read_dim3(tailor_ctx *ctx, tailor_space *s, const char *field,
                               unsigned out[3])
{
    lua_State *L = s->L;
    out[0] = out[1] = out[2] = 1;
    if (!lua_istable(L, -1)) {
        lua_pop(L, 1);
        return tailor_set_error(ctx, TAILOR_ERR_LUA, "search space %s: '%s' must give {x, y, z}",
                                s->origin, field);
    }
    for (int i = 0; i < 3; i++) {
        lua_rawgeti(L, -1, i + 1);
        if (!lua_isnil(L, -1)) {
            int ok = 0;
            lua_Integer v = lua_tointegerx(L, -1, &ok);
            if (!ok || v <= 0 || v > 0x7fffffff) {
                lua_pop(L, 2);
                return tailor_set_error(ctx, TAILOR_ERR_LUA,
                                        "search space %s: '%s'[%d] must be a positive integer",
                                        s->origin, field, i + 1);
            }
            out[i] = (unsigned)v;
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return TAILOR_OK;
}

static tailor_status read_valid(tailor_ctx *ctx, tailor_space *s, const call_args *a,
                                tailor_launch *out)
{
    lua_State *L = s->L;
    out->valid = 1;
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->table_ref);
    raw_getfield(L, -1, "valid");
    lua_remove(L, -2);
    if (!lua_isfunction(L, -1)) {
        lua_pop(L, 1);
        return TAILOR_OK;
    }
    push_config(L, a->cfg);
    push_shape(L, a->shape);
    lua_pushstring(L, tailor_dtype_name(a->dtype));
    push_device(L, a->dev);
    lua_pushstring(L, a->purpose ? a->purpose : "plan");
    tailor_status st = space_pcall_n(ctx, s, 5, 2, "in 'valid'", NULL); /* ok, reason */
    if (st)
        return st;
    out->valid = lua_toboolean(L, -2);
    if (!out->valid)
        copy_text(out->invalid_reason, sizeof out->invalid_reason,
                  lua_isstring(L, -1) ? lua_tostring(L, -1) : "refused by the space's rules");
    lua_pop(L, 2);
    return TAILOR_OK;
}

/* `requires`: nil, or a list of feature names (tailor_device_has_feature's); anything else is a
 * malformed space, refused with the entry at fault rather than read as "needs nothing". */
static tailor_status read_features(tailor_ctx *ctx, tailor_space *s, const call_args *a,
                                   tailor_launch *out)
{
    lua_State *L = s->L;
    tailor_status st = get_field(ctx, s, "requires", a);
    if (st)
        return st;
    if (!lua_isnil(L, -1) && !lua_istable(L, -1)) {
        lua_pop(L, 1);
        return tailor_set_error(ctx, TAILOR_ERR_LUA,
                                "search space %s: 'requires' must give a list of feature names",
                                s->origin);
    }
    if (lua_istable(L, -1)) {
        const size_t cap = sizeof out->features[0];
        for (lua_Integer i = 1; lua_rawgeti(L, -1, i) != LUA_TNIL; i++) {
            const char *why = NULL;
            if (lua_type(L, -1) != LUA_TSTRING)
                why = "is not a string";
            else if (out->nfeatures == TAILOR_SPACE_MAX_FEATURES)
                why = "is one feature too many";
            else if (strlen(lua_tostring(L, -1)) >= cap)
                why = "is too long for a feature name";
            if (why) {
                lua_pop(L, 2);
                return tailor_set_error(ctx, TAILOR_ERR_LUA,
                                        "search space %s: 'requires' entry %lld %s", s->origin,
                                        (long long)i, why);
            }
            snprintf(out->features[out->nfeatures++], cap, "%s", lua_tostring(L, -1));
            lua_pop(L, 1);
        }
        lua_pop(L, 1); /* the nil that ended the list */
    }
    lua_pop(L, 1);
    return TAILOR_OK;
}

/* The `defines` entry on top of the stack (key at -2, value at -1) as out's next define; a
 * malformed one (a list entry, a name that is no C identifier, one too many, a value that is no
 * scalar, a parameter's name) sets
 * the error naming it and leaves the stack as it is. */
static tailor_status read_define(tailor_ctx *ctx, tailor_space *s, const call_args *a,
                                 tailor_launch *out)
{
    lua_State *L = s->L;
    if (lua_type(L, -2) != LUA_TSTRING)
        return tailor_set_error(ctx, TAILOR_ERR_LUA, "search space %s: 'defines' must map names "
                                "to values (it gives a list entry)", s->origin);
    const char *name = lua_tostring(L, -2);
    if (!is_define_name(name))
        return tailor_set_error(ctx, TAILOR_ERR_LUA, "search space %s: 'defines' gives '%s', "
                                "which is not a C identifier of at most 47 characters",
                                s->origin, name);
    if (out->ndefines == TAILOR_GEN_MAX_DEFINES)
        return tailor_set_error(ctx, TAILOR_ERR_LUA, "search space %s: 'defines' gives %s past "
                                "the %d defines a kernel takes (parameters included)",
                                s->origin, name, TAILOR_GEN_MAX_DEFINES);
    tailor_define *d = &out->defines[out->ndefines];
    if (!value_to_string(L, -1, d->value, sizeof d->value))
        return tailor_set_error(ctx, TAILOR_ERR_LUA, "search space %s: 'defines' gives %s a "
                                "value that is not a number, boolean or string", s->origin, name);
    /* a parameter is a define already: a second -D of it could silently differ */
    for (int i = 0; i < a->cfg->nparams; i++)
        if (strcmp(a->cfg->params[i].name, name) == 0)
            return tailor_set_error(ctx, TAILOR_ERR_LUA, "search space %s: 'defines' gives %s, "
                                    "which is a parameter (parameters are defines already)",
                                    s->origin, name);
    snprintf(d->name, sizeof d->name, "%s", name);
    out->ndefines++;
    return TAILOR_OK;
}

static int cmp_define_name(const void *a, const void *b)
{
    return strcmp(((const tailor_define *)a)->name, ((const tailor_define *)b)->name);
}

static int cmp_workspace_name(const void *a, const void *b)
{
    return strcmp(((const tailor_workspace_need *)a)->name, ((const tailor_workspace_need *)b)->name);
}

/* The parameters as defines, then the space's `defines` sorted by name: a Lua table comes out in
 * hash order, which may differ between runs, and a launch must not. */
static tailor_status read_defines(tailor_ctx *ctx, tailor_space *s, const call_args *a,
                                  tailor_launch *out)
{
    lua_State *L = s->L;
    out->ndefines = 0;
    for (int i = 0; i < a->cfg->nparams && out->ndefines < TAILOR_GEN_MAX_DEFINES; i++)
        out->defines[out->ndefines++] = a->cfg->params[i];
    tailor_status st = get_field(ctx, s, "defines", a);
    if (st)
        return st;
    if (lua_istable(L, -1)) {
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            st = read_define(ctx, s, a, out);
            lua_pop(L, st ? 3 : 1); /* after the message: it names the key */
            if (st)
                return st;
        }
    } else if (!lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return tailor_set_error(ctx, TAILOR_ERR_LUA, "search space %s: 'defines' must give a table",
                                s->origin);
    }
    lua_pop(L, 1);
    int np = a->cfg->nparams < out->ndefines ? a->cfg->nparams : out->ndefines;
    qsort(out->defines + np, (size_t)(out->ndefines - np), sizeof *out->defines, cmp_define_name);
    return TAILOR_OK;
}

static tailor_status read_workspace(tailor_ctx *ctx, tailor_space *s, const call_args *a,
                                    tailor_launch *out)
{
    lua_State *L = s->L;
    tailor_status st = get_field(ctx, s, "workspace", a);
    if (st)
        return st;
    if (lua_istable(L, -1)) {
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            if (lua_type(L, -2) != LUA_TSTRING || !lua_isinteger(L, -1) ||
                out->nworkspace >= TAILOR_SPACE_MAX_WORKSPACE) {
                lua_pop(L, 3);
                return tailor_set_error(ctx, TAILOR_ERR_LUA,
                                        "search space %s: 'workspace' must map names to byte "
                                        "counts (at most %d)",
                                        s->origin, TAILOR_SPACE_MAX_WORKSPACE);
            }
            snprintf(out->workspace[out->nworkspace].name, 32, "%s", lua_tostring(L, -2));
            out->workspace[out->nworkspace].bytes = lua_tointeger(L, -1);
            char what[64];
            snprintf(what, sizeof what, "'workspace' %s", out->workspace[out->nworkspace].name);
            tailor_status bs = check_bytes(ctx, s, what, out->workspace[out->nworkspace].bytes);
            if (bs) {
                lua_pop(L, 3);
                return bs;
            }
            out->nworkspace++;
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    qsort(out->workspace, (size_t)out->nworkspace, sizeof *out->workspace, cmp_workspace_name);
    return TAILOR_OK;
}

/* One entry of `args`: "name" | {i32 = "key"|n} | {i64 = ...} | {f32 = x}. */
static tailor_status read_arg(tailor_ctx *ctx, tailor_space *s, const tailor_shape *shape,
                              lua_Integer idx, tailor_arg *arg)
{
    lua_State *L = s->L;
    memset(arg, 0, sizeof *arg);
    if (lua_type(L, -1) == LUA_TSTRING) {
        arg->kind = TAILOR_ARG_BUFFER;
        snprintf(arg->name, sizeof arg->name, "%s", lua_tostring(L, -1));
        return TAILOR_OK;
    }
    static const struct {
        const char *key;
        tailor_arg_kind kind;
    } kinds[] = {{"i32", TAILOR_ARG_I32}, {"i64", TAILOR_ARG_I64}, {"f32", TAILOR_ARG_F32}};
    if (lua_istable(L, -1)) {
        for (size_t k = 0; k < 3; k++) {
            raw_getfield(L, -1, kinds[k].key);
            if (lua_isnil(L, -1)) {
                lua_pop(L, 1);
                continue;
            }
            arg->kind = kinds[k].kind;
            if (lua_type(L, -1) == LUA_TSTRING) {
                const char *key = lua_tostring(L, -1);
                if (!tailor_shape_has(shape, key)) {
                    lua_pop(L, 1);
                    return tailor_set_error(ctx, TAILOR_ERR_LUA,
                                            "search space %s: args[%lld] names shape key '%s', "
                                            "which the shape does not have",
                                            s->origin, (long long)idx, key);
                }
                snprintf(arg->name, sizeof arg->name, "%s", key);
                arg->i = tailor_shape_get(shape, key, 0);
                arg->f = (double)arg->i;
            } else if (lua_isnumber(L, -1)) {
                arg->f = lua_tonumber(L, -1);
                arg->i = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : (long long)arg->f;
                if (arg->kind == TAILOR_ARG_I32 && (arg->i < INT32_MIN || arg->i > INT32_MAX)) {
                    lua_pop(L, 1);
                    return tailor_set_error(ctx, TAILOR_ERR_LUA,
                                            "search space %s: args[%lld] gives %lld, which does "
                                            "not fit the 32-bit integer it is declared as (use "
                                            "i64)",
                                            s->origin, (long long)idx, arg->i);
                }
            } else {
                lua_pop(L, 1);
                break;
            }
            lua_pop(L, 1);
            return TAILOR_OK;
        }
    }
    return tailor_set_error(ctx, TAILOR_ERR_LUA,
                            "search space %s: args[%lld] must be a buffer name or {i32|i64|f32 = "
                            "shape key or number}",
                            s->origin, (long long)idx);
}

static tailor_status read_args(tailor_ctx *ctx, tailor_space *s, const call_args *a,
                               tailor_launch *out)
{
    lua_State *L = s->L;
    tailor_status st = get_field(ctx, s, "args", a);
    if (st)
        return st;
    if (!lua_istable(L, -1)) {
        lua_pop(L, 1);
        return tailor_set_error(ctx, TAILOR_ERR_LUA, "search space %s: 'args' must give a list",
                                s->origin);
    }
    for (lua_Integer i = 1; lua_rawgeti(L, -1, i) != LUA_TNIL; i++) {
        if (out->nargs >= TAILOR_SPACE_MAX_ARGS) {
            lua_pop(L, 2);
            return tailor_set_error(ctx, TAILOR_ERR_LUA, "search space %s: more than %d args",
                                    s->origin, TAILOR_SPACE_MAX_ARGS);
        }
        st = read_arg(ctx, s, a->shape, i, &out->args[out->nargs]);
        lua_pop(L, 1);
        if (st) {
            lua_pop(L, 1);
            return st;
        }
        out->nargs++;
    }
    lua_pop(L, 2);
    return TAILOR_OK;
}

typedef struct evaluate_args {
    tailor_ctx *ctx;
    tailor_space *s;
    call_args a;
    int valid_first; /* TAILOR_EVAL_VALID_FIRST */
    tailor_launch *out;
} evaluate_args;

static tailor_status evaluate_body(void *arg)
{
    evaluate_args *ea = arg;
    tailor_ctx *ctx = ea->ctx;
    tailor_space *s = ea->s;
    const call_args a = ea->a;
    tailor_launch *out = ea->out;
    long long threads = 0;
    tailor_status st;
    /* a refused configuration: its defines too for the plan's report, nothing more (and not
     * even those under TAILOR_EVAL_VALID_FIRST) */
    if ((st = read_valid(ctx, s, &a, out)) || (!out->valid && ea->valid_first) ||
        (st = read_defines(ctx, s, &a, out)) || !out->valid)
        return st;
    if ((st = get_integer(ctx, s, "threads", &a, &threads)) ||
        (st = get_integer(ctx, s, "smem_static", &a, &out->smem_static)) ||
        (st = get_integer(ctx, s, "smem_dynamic", &a, &out->smem_dynamic)) ||
        (st = read_features(ctx, s, &a, out)) || (st = read_workspace(ctx, s, &a, out)) ||
        (st = read_args(ctx, s, &a, out)))
        return st;
    if (threads <= 0 || threads > 1 << 20)
        return tailor_set_error(ctx, TAILOR_ERR_LUA, "search space %s: 'threads' gave %lld",
                                s->origin, threads);
    if ((st = check_bytes(ctx, s, "'smem_static'", out->smem_static)) ||
        (st = check_bytes(ctx, s, "'smem_dynamic'", out->smem_dynamic)))
        return st;
    out->threads = (int)threads;
    if ((st = get_field(ctx, s, "grid", &a)) || (st = read_dim3(ctx, s, "grid", out->grid)))
        return st;
    if ((st = get_field(ctx, s, "block", &a)))
        return st;
    if (lua_isnil(s->L, -1)) {
        lua_pop(s->L, 1);
        out->block[0] = (unsigned)threads;
        out->block[1] = out->block[2] = 1;
    } else if ((st = read_dim3(ctx, s, "block", out->block))) {
        return st;
    }
    return TAILOR_OK;
}

tailor_status tailor_space_evaluate(tailor_ctx *ctx, tailor_space *s, const tailor_config *cfg,
                                    const tailor_shape *shape, tailor_dtype dtype,
                                    const tailor_device_info *dev, int how,
                                    tailor_launch *out)
{
    memset(out, 0, sizeof *out);
    const char *purpose = how & TAILOR_EVAL_LAUNCH ? "launch" : "plan";
    evaluate_args a = {ctx, s, {cfg, shape, dtype, dev, purpose},
                       (how & TAILOR_EVAL_VALID_FIRST) != 0, out};
    return space_protected(ctx, s, "evaluating a configuration", evaluate_body, &a);
}

/* ---- formatting ----------------------------------------------------------------------------- */

void tailor_config_format(const tailor_config *cfg, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < cfg->nparams && len < size; i++) {
        int w = snprintf(buf + len, size - len, "%s%s=%s", i ? " " : "", cfg->params[i].name,
                         cfg->params[i].value);
        if (w < 0)
            break;
        len += (size_t)w;
    }
}

void tailor_config_json(const tailor_config *cfg, char *buf, size_t size)
{
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; i < cfg->nparams; i++) {
        const char *v = cfg->params[i].value;
        char *end = NULL;
        long long n = strtoll(v, &end, 10);
        if (*v && *end == '\0')
            cJSON_AddNumberToObject(o, cfg->params[i].name, (double)n);
        else
            cJSON_AddStringToObject(o, cfg->params[i].name, v);
    }
    char *text = cJSON_PrintUnformatted(o);
    snprintf(buf, size, "%s", text ? text : "{}");
    free(text);
    cJSON_Delete(o);
}

tailor_status tailor_config_parse_json(tailor_ctx *ctx, const char *json, tailor_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithOpts(json, &end, 1);
    if (!o || !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return tailor_set_error(ctx, TAILOR_ERR_PARSE, "parameters '%s' are not a JSON object",
                                json);
    }
    for (cJSON *it = o->child; it && cfg->nparams < TAILOR_SPACE_MAX_PARAMS; it = it->next) {
        tailor_define *d = &cfg->params[cfg->nparams++];
        snprintf(d->name, sizeof d->name, "%s", it->string);
        if (cJSON_IsNumber(it))
            snprintf(d->value, sizeof d->value, "%lld", (long long)it->valuedouble);
        else if (cJSON_IsString(it))
            snprintf(d->value, sizeof d->value, "%s", it->valuestring);
        else if (cJSON_IsBool(it))
            snprintf(d->value, sizeof d->value, "%d", cJSON_IsTrue(it) ? 1 : 0);
    }
    cJSON_Delete(o);
    return TAILOR_OK;
}

/* The op the built-in copy of `file` ("rmsnorm.lua") declares into op; "" when tailor has none
 * or it does not load. */
static void builtin_op(const char *file, char *op, size_t size)
{
    op[0] = '\0';
    for (size_t i = 0; i < tailor_embedded_count; i++) {
        const tailor_embedded_file *e = &tailor_embedded_files[i];
        if (strcmp(e->path, file) != 0)
            continue;
        char origin[96];
        snprintf(origin, sizeof origin, "embedded:%s", file);
        tailor_space *s = NULL;
        if (space_from_text(NULL, file, origin, e->data, e->size, &s) == TAILOR_OK)
            snprintf(op, size, "%s", s->op);
        tailor_space_destroy(s);
        return;
    }
}

/* When a space from TAILOR_TEMPLATE_PATH declares another op than `op` while the built-in
 * template of its name implements `op`, appends "ORIGIN declares op 'X'" to why (the override
 * hid the built-in). */
static void note_hidden(const tailor_space *s, const char *file, const char *op, char *why,
                        size_t size)
{
    char was[64];
    if (strcmp(s->op, op) == 0 || strncmp(s->origin, "embedded:", 9) == 0)
        return;
    builtin_op(file, was, sizeof was);
    if (strcmp(was, op) != 0)
        return;
    size_t used = strlen(why);
    snprintf(why + used, size - used, "%s%s declares op '%s' and hides the built-in %s",
             used ? "; " : "", s->origin, s->op, file);
}

/* The op each space script declares, by the SHA-256 of its text and the space library's: a
 * script runs sandboxed, so the same texts declare the same op, and tailor_space_find_for_op
 * need not run every space again for every op it is asked about (it is asked for each kernel a
 * model looks up and each target a tuning run plans). Keyed by content, never stale; bounded
 * (past OP_MEMO_SIZE entries, scripts simply run). Shared by threads under its lock. */
enum { OP_MEMO_SIZE = 512 };
static struct {
    char key[65]; /* sha256(sha256(space) sha256(library)) */
    char op[64];
} op_memo[OP_MEMO_SIZE];
static int op_memo_count;
static pthread_mutex_t op_memo_lock = PTHREAD_MUTEX_INITIALIZER;

static int op_memo_get(const char key[65], char op[64])
{
    int found = 0;
    pthread_mutex_lock(&op_memo_lock);
    for (int i = 0; i < op_memo_count && !found; i++)
        if (strcmp(op_memo[i].key, key) == 0) {
            memcpy(op, op_memo[i].op, 64);
            found = 1;
        }
    pthread_mutex_unlock(&op_memo_lock);
    return found;
}

static void op_memo_put(const char key[65], const char *op)
{
    pthread_mutex_lock(&op_memo_lock);
    if (op_memo_count < OP_MEMO_SIZE) {
        memcpy(op_memo[op_memo_count].key, key, 65);
        snprintf(op_memo[op_memo_count].op, sizeof op_memo[op_memo_count].op, "%s", op);
        op_memo_count++;
    }
    pthread_mutex_unlock(&op_memo_lock);
}

/* The op space `name` declares: from the memo when its text was run before with this library,
 * else by running it. */
static tailor_status declared_op(tailor_ctx *ctx, const char *name, const char lib_hash[65],
                                 char op[64])
{
    char file[80];
    size_t n = strlen(name);
    int has_ext = n > 4 && strcmp(name + n - 4, ".lua") == 0;
    snprintf(file, sizeof file, "%s%s", name, has_ext ? "" : ".lua");
    tailor_template_file f;
    tailor_status st = tailor_template_read(ctx, file, &f);
    if (st)
        return st;
    char both[130], key[65];
    tailor_sha256_hex(f.text, f.size, both);
    memcpy(both + 64, lib_hash, 65);
    tailor_sha256_hex(both, 128, key);
    if (!op_memo_get(key, op)) {
        tailor_space *s = NULL;
        st = space_from_text(ctx, file, f.origin, f.text, f.size, &s);
        if (st == TAILOR_OK) {
            snprintf(op, 64, "%s", s->op);
            op_memo_put(key, s->op);
        }
        tailor_space_destroy(s);
    }
    tailor_template_file_free(&f);
    return st;
}

/* The spaces that do not declare op but whose built-in namesake does (an override hiding the
 * built-in), for the message when none implements op. */
static void note_all_hidden(tailor_ctx *ctx, char **all, int n, const char *op, char *why,
                            size_t size)
{
    for (int i = 0; i < n; i++) {
        tailor_space *s = NULL;
        if (tailor_space_load(ctx, all[i], &s) == TAILOR_OK)
            note_hidden(s, all[i], op, why, size);
        tailor_space_destroy(s);
    }
}

tailor_status tailor_space_find_for_op(tailor_ctx *ctx, const char *op, char ***names, int *count)
{
    char **all = NULL;
    int n = 0;
    tailor_status st = tailor_template_list_spaces(ctx, &all, &n);
    if (st)
        return st;
    char lib_hash[65];
    tailor_template_file lib;
    if ((st = tailor_template_read(ctx, SPACE_LIB, &lib))) {
        tailor_template_names_free(all, n);
        return st;
    }
    tailor_sha256_hex(lib.text, lib.size, lib_hash);
    tailor_template_file_free(&lib);
    char **mine = calloc((size_t)(n ? n : 1), sizeof *mine);
    int m = 0;
    if (!mine) {
        tailor_template_names_free(all, n);
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        char declared[64];
        if ((st = declared_op(ctx, all[i], lib_hash, declared))) {
            tailor_template_names_free(all, n);
            tailor_template_names_free(mine, m);
            return st;
        }
        if (strcmp(declared, op) == 0) {
            size_t len = strlen(all[i]);
            mine[m++] = strndup(all[i], len > 4 && strcmp(all[i] + len - 4, ".lua") == 0 ? len - 4
                                                                                         : len);
        }
    }
    if (m == 0) {
        char hidden[2048] = "";
        note_all_hidden(ctx, all, n, op, hidden, sizeof hidden);
        tailor_template_names_free(all, n);
        free(mine);
        return tailor_set_error(ctx, TAILOR_ERR_NOT_FOUND, "no template implements op '%s'%s%s%s",
                                op, hidden[0] ? " (" : "", hidden, hidden[0] ? ")" : "");
    }
    tailor_template_names_free(all, n);
    *names = mine;
    *count = m;
    return TAILOR_OK;
}

void tailor_launch_json(const tailor_launch *l, char *buf, size_t size)
{
    snprintf(buf, size,
             "{\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"threads\":%d,\"smem_static\":%lld,"
             "\"smem_dynamic\":%lld}",
             l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2],
             l->threads, l->smem_static, l->smem_dynamic);
}
