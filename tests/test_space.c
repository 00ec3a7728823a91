/* test_space.c — search spaces and the budget, without a GPU: enumeration, the Lua sandbox and
 * its error messages (file and line), variants added through TAILOR_TEMPLATE_PATH, and refusals
 * with their arithmetic against device profiles. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plan.h"
#include "registry.h"
#include "space.h"
#include "testlib.h"

static char dir[256];

static void write_file(const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

static void remove_file(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    remove(path);
}

static void test_enumerate(tailor_ctx *ctx)
{
    tailor_space *s = NULL;
    CHECK_OK(ctx, tailor_space_load(ctx, "rmsnorm", &s));
    if (!s)
        return;
    CHECK(strcmp(tailor_space_op(s), "rmsnorm") == 0);
    CHECK(strcmp(tailor_space_source(s), "rmsnorm.cu") == 0);
    CHECK(tailor_space_supports(s, TAILOR_DTYPE_BF16) && !tailor_space_supports(s, TAILOR_DTYPE_F32));
    tailor_shape shape;
    CHECK_OK(ctx, tailor_shape_parse(ctx, "rows=3,cols=1536,weight=1", &shape));
    tailor_config *cfgs = NULL;
    int n = 0;
    CHECK_OK(ctx, tailor_space_enumerate(ctx, s, &shape, TAILOR_DTYPE_BF16,
                                         tailor_device_profile_find("h200"), &cfgs, &n));
    CHECK(n == 24); /* 6 THREADS x 4 VEC */
    if (n > 0) {
        char text[128], json[128];
        tailor_config_format(&cfgs[0], text, sizeof text);
        tailor_config_json(&cfgs[0], json, sizeof json);
        CHECKF(strcmp(text, "THREADS=32 VEC=1") == 0, "%s", text);
        CHECKF(strcmp(json, "{\"THREADS\":32,\"VEC\":1}") == 0, "%s", json);
        tailor_config back;
        CHECK_OK(ctx, tailor_config_parse_json(ctx, json, &back));
        CHECK(back.nparams == 2 && strcmp(back.params[1].value, "1") == 0);
        tailor_launch l;
        CHECK_OK(ctx, tailor_space_evaluate(ctx, s, &cfgs[20] /* THREADS=1024 VEC=1 */, &shape, TAILOR_DTYPE_BF16,
                                            tailor_device_profile_find("h200"), 0, &l));
        CHECK(l.valid && l.threads == 1024 && l.grid[0] == 3 && l.block[0] == 1024);
        CHECK(l.smem_static == 128 && l.smem_dynamic == 0);
        CHECK(l.nargs == 5 && l.args[3].kind == TAILOR_ARG_I32 && l.args[3].i == 1536);
        CHECK(l.args[4].kind == TAILOR_ARG_F32 && l.args[4].f > 0.9e-6 && l.args[4].f < 1.1e-6);
        CHECK(l.nfeatures == 1 && strcmp(l.features[0], "bf16") == 0);
        /* the geometry as the cache keeps it beside a winner */
        char lj[512];
        tailor_launch_json(&l, lj, sizeof lj);
        CHECKF(strcmp(lj, "{\"grid\":[3,1,1],\"block\":[1024,1,1],\"threads\":1024,"
                          "\"smem_static\":128,\"smem_dynamic\":0}") == 0, "%s", lj);
    }
    free(cfgs);
    /* the hash is of the files: a second load of the same space has the same one, another
     * space another */
    char hash1[65], hash2[65], hash3[65];
    tailor_space *again = NULL, *other = NULL;
    CHECK_OK(ctx, tailor_space_hash(ctx, s, hash1));
    CHECK_OK(ctx, tailor_space_load(ctx, "rmsnorm", &again));
    CHECK_OK(ctx, tailor_space_load(ctx, "embed", &other));
    if (again && other) {
        CHECK_OK(ctx, tailor_space_hash(ctx, again, hash2));
        CHECK_OK(ctx, tailor_space_hash(ctx, other, hash3));
        CHECK(strlen(hash1) == 64 && strcmp(hash1, hash2) == 0 && strcmp(hash1, hash3) != 0);
    }
    tailor_space_destroy(again);
    tailor_space_destroy(other);
    tailor_space_destroy(s);
}

/* Loads `name` from the temp dir and checks that it fails with all the given fragments. */
static void expect_broken(tailor_ctx *ctx, const char *name, const char *frag1, const char *frag2)
{
    tailor_space *s = NULL;
    tailor_status st = tailor_space_load(ctx, name, &s);
    if (st == TAILOR_OK) { /* some errors only show when the functions run */
        tailor_shape shape;
        tailor_shape_parse(ctx, "rows=2,cols=256,weight=1", &shape);
        tailor_config *cfgs = NULL;
        int n = 0;
        st = tailor_space_enumerate(ctx, s, &shape, TAILOR_DTYPE_F16,
                                    tailor_device_profile_find("t4"), &cfgs, &n);
        if (st == TAILOR_OK && n > 0) {
            tailor_launch l;
            st = tailor_space_evaluate(ctx, s, &cfgs[0], &shape, TAILOR_DTYPE_F16,
                                       tailor_device_profile_find("t4"), 0, &l);
        }
        free(cfgs);
        tailor_space_destroy(s);
    }
    CHECKF(st == TAILOR_ERR_LUA, "%s loaded and ran", name);
    const char *msg = tailor_ctx_message(ctx);
    printf("%s -> %s\n", name, msg);
    CHECKF(strstr(msg, frag1) != NULL, "'%s' not in: %s", frag1, msg);
    CHECKF(!frag2 || strstr(msg, frag2) != NULL, "'%s' not in: %s", frag2, msg);
}

#define GOOD_TAIL                                                                                  \
    "  threads = function(p) return 32 end,\n  smem_static = 0, smem_dynamic = 0,\n"               \
    "  grid = function(p, s) return { s.rows } end,\n  args = { \"out\" },\n}\n"

/* One pass over a space's whole life (load, enumerate, evaluate every configuration, destroy);
 * the first status other than OK, or OK. */
static tailor_status space_life(tailor_ctx *ctx, const char *name, const tailor_shape *shape,
                                int *configs)
{
    tailor_space *s = NULL;
    tailor_status st = tailor_space_load(ctx, name, &s);
    tailor_config *cfgs = NULL;
    int n = 0;
    if (st == TAILOR_OK)
        st = tailor_space_enumerate(ctx, s, shape, TAILOR_DTYPE_BF16,
                                    tailor_device_profile_find("h200"), &cfgs, &n);
    for (int i = 0; st == TAILOR_OK && i < n; i++) {
        tailor_launch l;
        st = tailor_space_evaluate(ctx, s, &cfgs[i], shape, TAILOR_DTYPE_BF16,
                                   tailor_device_profile_find("h200"), 0, &l);
    }
    *configs = n;
    free(cfgs);
    tailor_space_destroy(s);
    return st;
}

/* The host's allocator failing from any one of a space's Lua allocations on — the sandbox and
 * the space library set up, the script run, the C side's pushes of a shape or a device, the
 * calls of every field — gives a status, never Lua's panic (which aborts the process: this test
 * would die), and the next pass runs whole again. rmsnorm's own space, and one whose params are
 * functions (enumerating then calls them with a pushed shape and device). */
static void test_out_of_memory(tailor_ctx *ctx)
{
    write_file("oomfn.lua",
               "return { op = 'rmsnorm', source = 'rmsnorm.cu',\n"
               "  params = { T = function(s, d, dev) return { 32, dev.sm >= 80 and 64 or 32 } end,\n"
               "             V = function(s) return { 1, s.cols % 2 == 0 and 2 or 1 } end },\n"
               "  threads = function(p) return p.T end, grid = function(p, s) return { s.rows } end,\n"
               "  smem_static = 0, smem_dynamic = 0,\n"
               "  args = function(p, s) return { 'out', { i32 = s.cols } } end }\n");
    static const struct {
        const char *space;
        int configs, stride;
    } cases[] = {{"rmsnorm", 24, 1}, {"oomfn", 4, 3}};
    tailor_shape shape;
    CHECK_OK(ctx, tailor_shape_parse(ctx, "rows=3,cols=1536,weight=1", &shape));
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int configs = 0, nomem = 0, other = 0, whole = 0;
        long n = 1;
        for (; n < 200000; n += n < 4000 ? cases[c].stride : 13) {
            tailor_space_fail_allocations_from(n);
            tailor_status st = space_life(ctx, cases[c].space, &shape, &configs);
            tailor_space_fail_allocations_from(0);
            if (st == TAILOR_OK && configs == cases[c].configs) {
                whole = 1; /* the nth allocation never came: past the whole life */
                break;
            }
            if (st == TAILOR_ERR_NOMEM)
                nomem++;
            else if (other++ == 0)
                printf("%s: out of memory at allocation %ld read as: %s\n", cases[c].space, n,
                       st ? tailor_ctx_message(ctx) : "(no error)");
            if (st == TAILOR_ERR_NOMEM && nomem == 1)
                CHECKF(strstr(tailor_ctx_message(ctx), "out of memory") ||
                           strstr(tailor_ctx_message(ctx), "not enough memory"),
                       "%s", tailor_ctx_message(ctx));
            CHECKF(space_life(ctx, cases[c].space, &shape, &configs) == TAILOR_OK &&
                       configs == cases[c].configs,
                   "%s: after a failure at allocation %ld the next pass failed: %s",
                   cases[c].space, n, tailor_ctx_message(ctx));
        }
        printf("%s: out of memory from each of %ld allocations: %d out-of-memory statuses, %d "
               "others\n", cases[c].space, n, nomem, other);
        CHECKF(whole && nomem > 1000 / cases[c].stride && other == 0,
               "%s: %ld allocations walked, %d read as out of memory, %d as something else",
               cases[c].space, n, nomem, other);
    }
    remove_file("oomfn.lua");
}

static void test_sandbox(tailor_ctx *ctx)
{
    write_file("syntax.lua", "return {\n  op = \"rmsnorm\",\n  params = { A = {1, 2 },\n");
    expect_broken(ctx, "syntax", "syntax.lua:", "expected");
    write_file("uses_io.lua", "local f = io.open('/etc/passwd')\nreturn {}\n");
    expect_broken(ctx, "uses_io", "uses_io.lua:1:", "unknown global 'io'");
    write_file("uses_os.lua", "return { op = os.getenv('HOME') }\n");
    expect_broken(ctx, "uses_os", "uses_os.lua:1:", "unknown global 'os'");
    write_file("uses_require.lua", "\n\nlocal x = require('socket')\nreturn {}\n");
    expect_broken(ctx, "uses_require", "uses_require.lua:3:", "unknown global 'require'");
    write_file("global.lua", "counter = 1\nreturn {}\n");
    expect_broken(ctx, "global", "global.lua:1:", "globals are locked");
    write_file("loop.lua", "return { op = 'rmsnorm', source = 'rmsnorm.cu',\n"
                           "  params = { A = function() while true do end end },\n" GOOD_TAIL);
    expect_broken(ctx, "loop", "loop.lua:2:", "instructions");
    /* Hostile spaces, each answered in one line and removed after: what a space returns is read
     * raw (an __index function neither aborts the process, as an error outside a protected call
     * would, nor hangs it); a __gc function (run with hooks off) is refused; a space's pcall
     * cannot catch the instruction limit and loop on; the pattern functions (C code the count
     * cannot stop) are not there; a script growing without end stops at its memory limit. */
    static const struct {
        const char *name, *text, *where, *why;
    } hostile[] = {
        {"metaerr", "return setmetatable({}, {__index = function() error('boom') end})\n",
         "metaerr.lua", "field 'op' must be a string"},
        {"metaloop", "return setmetatable({}, {__index = function() while true do end end})\n",
         "metaloop.lua", "field 'op' must be a string"},
        {"finalizer", "local t = setmetatable({}, {__gc = function() while true do end end})\n"
                      "return {}\n",
         "finalizer.lua:1:", "__gc metamethods are not allowed"},
        {"pcallloop", "local function spin() while true do end end\n"
                      "while true do pcall(spin) end\n",
         "pcallloop.lua:", "ran past 50000000 instructions"},
        {"pattern", "local x = string.find(string.rep('a', 3000), '.-.-.-b')\nreturn {}\n",
         "pattern.lua:1:", "field 'find'"},
        {"membomb", "local s = 'x'\nwhile true do s = s .. s end\n", "membomb.lua",
         "past its 256 MB of memory"},
        {"recurse", "local function f(n) return f(n + 1) + 1 end\nreturn f(1)\n",
         "recurse.lua:1:", "stack overflow"},
    };
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        char file[64];
        snprintf(file, sizeof file, "%s.lua", hostile[i].name);
        write_file(file, hostile[i].text);
        expect_broken(ctx, hostile[i].name, hostile[i].where, hostile[i].why);
        CHECKF(!strchr(tailor_ctx_message(ctx), '\n'), "%s: a multi-line error: %s",
               hostile[i].name, tailor_ctx_message(ctx));
        remove_file(file);
    }
    write_file("nogrid.lua", "return { op = 'rmsnorm', source = 'rmsnorm.cu', params = { A = {1} },\n"
                             "  threads = 32, smem_static = 0, smem_dynamic = 0, args = {} }\n");
    expect_broken(ctx, "nogrid", "nogrid.lua", "'grid' is missing");
    write_file("badarg.lua", "return { op = 'rmsnorm', source = 'rmsnorm.cu', params = { A = {1} },\n"
                             "  threads = 32, smem_static = 0, smem_dynamic = 0, grid = {1},\n"
                             "  args = { { i32 = 'no_such_key' } } }\n");
    expect_broken(ctx, "badarg", "badarg.lua", "no_such_key");
    write_file("thrower.lua", "return { op = 'rmsnorm', source = 'rmsnorm.cu', params = { A = {1} },\n"
                              "  threads = function(p, s)\n    error('bad threads')\n  end,\n"
                              "  smem_static = 0, smem_dynamic = 0, grid = {1}, args = {} }\n");
    expect_broken(ctx, "thrower", "thrower.lua:3:", "bad threads");
    write_file("dupdefine.lua", "return { op = 'rmsnorm', source = 'rmsnorm.cu', params = { A = {1} },\n"
                                "  defines = function(p) return { A = 2 } end,\n" GOOD_TAIL);
    expect_broken(ctx, "dupdefine", "dupdefine.lua", "'defines' gives A, which is a parameter");
    /* `requires` must be a list of feature names and `defines` a map of names to numbers,
     * booleans or strings: anything else is refused naming the entry, not read as "none" or
     * dropped. Each case: a space whose one field is `field`. */
    static const struct {
        const char *name, *field, *why;
    } fields[] = {
        {"reqstring", "requires = function() return 'bf16' end",
         "'requires' must give a list of feature names"},
        {"reqnumber", "requires = function() return { 'bf16', 80 } end",
         "'requires' entry 2 is not a string"},
        {"reqlong", "requires = { 'mma.m16n8k16.and.then.some.more' }",
         "'requires' entry 1 is too long"},
        {"deftable", "defines = function(p) return { B = { 1 } } end",
         "'defines' gives B a value that is not a number"},
        {"deflist", "defines = function(p) return { 'B=1' } end",
         "'defines' must map names to values"},
        {"defspace", "defines = function(p) return { ['A B'] = 1 } end",
         "'defines' gives 'A B', which is not a C identifier"},
        {"defdigit", "defines = { ['1X'] = 1 }", "'defines' gives '1X', which is not a C identifier"},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        char file[64], text[512];
        snprintf(file, sizeof file, "%s.lua", fields[i].name);
        snprintf(text, sizeof text,
                 "return { op = 'rmsnorm', source = 'rmsnorm.cu', params = { A = {1} },\n  %s,\n"
                 GOOD_TAIL,
                 fields[i].field);
        write_file(file, text);
        expect_broken(ctx, fields[i].name, file, fields[i].why);
    }
    /* an empty parameter list, a parameter that cannot be a -D name, a source outside the
     * template directories: refused naming the file and the field (not 0 candidates, not read) */
    static const struct {
        const char *name, *head, *why;
    } heads[] = {
        {"emptyparam", "source = 'rmsnorm.cu', params = { A = {1}, THREADS = { } }",
         "params.THREADS gives no values (an empty list)"},
        {"emptyfn", "source = 'rmsnorm.cu', params = { A = function() return {} end }",
         "params.A gives no values"},
        {"badparam", "source = 'rmsnorm.cu', params = { ['A-B'] = {1} }",
         "parameter 'A-B' is not a C identifier"},
        {"srcup", "source = '../../../../etc/passwd', params = { A = {1} }",
         "'source' must be a file name in the template directories (no '/' or '..'), not "
         "'../../../../etc/passwd'"},
        {"srcdir", "source = 'include/tailor_common.cuh', params = { A = {1} }",
         "'source' must be a file name"},
    };
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
        char file[64], text[512];
        snprintf(file, sizeof file, "%s.lua", heads[i].name);
        snprintf(text, sizeof text, "return { op = 'rmsnorm', %s,\n" GOOD_TAIL, heads[i].head);
        write_file(file, text);
        expect_broken(ctx, heads[i].name, file, heads[i].why);
    }
}

/* Values a space computes (rows * cols ...) are 64-bit in Lua: one that the launch would carry in
 * fewer bits, or a negative byte count, is refused naming the field, not truncated. */
static void test_ranges(tailor_ctx *ctx)
{
    static const struct {
        const char *name, *tail, *why;
    } cases[] = {
        {"argwide", "smem_static = 0, smem_dynamic = 0,\n"
                    "  args = function(p, s) return { 'out', { i32 = s.rows * s.cols * 4194304 } } end",
         "args[2] gives 2147483648, which does not fit the 32-bit integer"},
        {"argneg", "smem_static = 0, smem_dynamic = 0, args = { 'out', { i32 = -3000000000 } }",
         "args[2] gives -3000000000"},
        {"smemneg", "smem_static = 0, smem_dynamic = function(p, s) return 256 - s.cols * 4 end,\n"
                    "  args = { 'out' }",
         "'smem_dynamic' gave -768 bytes"},
        {"smemhuge", "smem_static = 1 << 50, smem_dynamic = 0, args = { 'out' }",
         "'smem_static' gave 1125899906842624 bytes"},
        {"wsneg", "smem_static = 0, smem_dynamic = 0, workspace = { partial = -8 },\n"
                  "  args = { 'out' }",
         "'workspace' partial gave -8 bytes"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char file[64], text[640];
        snprintf(file, sizeof file, "%s.lua", cases[i].name);
        snprintf(text, sizeof text,
                 "return { op = 'rmsnorm', source = 'rmsnorm.cu', params = { A = {1} },\n"
                 "  threads = 32, grid = function(p, s) return { s.rows } end,\n  %s }\n",
                 cases[i].tail);
        write_file(file, text);
        expect_broken(ctx, cases[i].name, file, cases[i].why);
        remove_file(file);
    }
    /* the same space within range evaluates (2 * 256 * 4,194,303 = 2,147,483,136 fits) */
    write_file("argfits.lua", "return { op = 'rmsnorm', source = 'rmsnorm.cu', params = { A = {1} },\n"
                              "  threads = 32, grid = {1}, smem_static = 0, smem_dynamic = 0,\n"
                              "  args = function(p, s) return { 'out', { i32 = s.rows * s.cols * "
                              "4194303 } } end }\n");
    tailor_space *sp = NULL;
    CHECK_OK(ctx, tailor_space_load(ctx, "argfits", &sp));
    tailor_shape shape;
    CHECK_OK(ctx, tailor_shape_parse(ctx, "rows=2,cols=256,weight=1", &shape));
    tailor_config *cfgs = NULL;
    int n = 0;
    CHECK_OK(ctx, tailor_space_enumerate(ctx, sp, &shape, TAILOR_DTYPE_F16,
                                         tailor_device_profile_find("t4"), &cfgs, &n));
    tailor_launch l;
    CHECK(n == 1);
    if (n == 1) {
        CHECK_OK(ctx, tailor_space_evaluate(ctx, sp, &cfgs[0], &shape, TAILOR_DTYPE_F16,
                                            tailor_device_profile_find("t4"), 0, &l));
        CHECK(l.nargs == 2 && l.args[1].i == 2147483136LL);
    }
    free(cfgs);
    tailor_space_destroy(sp);
    remove_file("argfits.lua");
}

static tailor_status plan_for(tailor_ctx *ctx, const char *device, const char *op,
                              const char *shape_text, tailor_dtype dtype, tailor_plan *plan)
{
    tailor_shape shape;
    tailor_status st = tailor_shape_parse(ctx, shape_text, &shape);
    if (st)
        return st;
    return tailor_plan_build(ctx, tailor_device_profile_find(device), op, &shape, dtype, plan);
}

/* A buffer argument that names neither an op buffer nor a workspace is refused when planned,
 * naming the argument and the op's buffers; a workspace name is accepted. */
static void test_arg_names(tailor_ctx *ctx)
{
    write_file("bogusarg.lua", "return { op = 'rmsnorm', source = 'rmsnorm.cu', params = { A = {1} },\n"
                               "  threads = 32, grid = {1}, smem_static = 0, smem_dynamic = 0,\n"
                               "  workspace = function() return { scratch = 64 } end,\n"
                               "  args = { 'out', 'scratch', 'bogus' } }\n");
    tailor_plan p;
    tailor_status st = plan_for(ctx, "t4", "rmsnorm", "rows=8,cols=512", TAILOR_DTYPE_F16, &p);
    CHECK(st == TAILOR_ERR_LUA);
    CHECKF(strstr(tailor_ctx_message(ctx), "args[3] names buffer 'bogus', which is neither a "
                  "buffer of op rmsnorm (") != NULL, "%s", tailor_ctx_message(ctx));
    if (st == TAILOR_OK)
        tailor_plan_free(&p);
    remove_file("bogusarg.lua");
}

static const tailor_plan_entry *find_entry(const tailor_plan *p, const char *tmpl, const char *cfg)
{
    for (int i = 0; i < p->nentries; i++) {
        char text[256];
        tailor_config_format(&p->entries[i].cfg, text, sizeof text);
        if (strcmp(p->entries[i].template_name, tmpl) == 0 && strcmp(text, cfg) == 0)
            return &p->entries[i];
    }
    return NULL;
}

/* Whether the op's spaces (tailor_space_find_for_op) list name. */
static int op_lists(tailor_ctx *ctx, const char *op, const char *name)
{
    char **names = NULL;
    int n = 0, found = 0;
    if (tailor_space_find_for_op(ctx, op, &names, &n) != TAILOR_OK)
        return 0;
    for (int i = 0; i < n; i++) {
        found |= strcmp(names[i], name) == 0;
        free(names[i]);
    }
    free(names);
    return found;
}

/* A launch's defines (after the parameters) and workspaces come sorted by name, whatever order
 * the Lua tables give them in (hash order, which may differ between runs). */
static void test_launch_order(tailor_ctx *ctx)
{
    write_file("order.lua",
               "return { op = 'rmsnorm', source = 'rmsnorm.cu', params = { Q = {1}, B = {2} },\n"
               "  threads = 32, grid = {1}, smem_static = 0, smem_dynamic = 0,\n"
               "  defines = function() return { ZED = 1, ALPHA = 2, MID = 3, KAPPA = 4, DELTA = 5,\n"
               "    OMEGA = 6, GAMMA = 7, YOTA = 8, EPS = 9, NU = 10 } end,\n"
               "  workspace = function() return { zz = 64, aa = 32, mm = 16, bb = 4 } end,\n"
               "  args = { 'out', 'zz', 'aa', 'mm', 'bb' } }\n");
    tailor_plan p;
    tailor_status st = plan_for(ctx, "t4", "rmsnorm", "rows=8,cols=512", TAILOR_DTYPE_F16, &p);
    CHECKF(st == TAILOR_OK, "%s", tailor_ctx_message(ctx));
    const tailor_plan_entry *e = st == TAILOR_OK ? find_entry(&p, "order", "B=2 Q=1") : NULL;
    CHECK(e != NULL);
    if (e) {
        static const char *const want[] = {"ALPHA", "DELTA", "EPS", "GAMMA", "KAPPA", "MID", "NU",
                                           "OMEGA", "YOTA", "ZED"};
        static const char *const ws[] = {"aa", "bb", "mm", "zz"};
        const tailor_launch *l = &e->launch;
        CHECK(l->ndefines == 12 && strcmp(l->defines[0].name, "B") == 0 &&
              strcmp(l->defines[1].name, "Q") == 0);
        for (int i = 0; i < 10 && l->ndefines == 12; i++)
            CHECKF(strcmp(l->defines[2 + i].name, want[i]) == 0, "define %d is %s, want %s", 2 + i,
                   l->defines[2 + i].name, want[i]);
        CHECK(l->nworkspace == 4);
        for (int i = 0; i < 4 && l->nworkspace == 4; i++)
            CHECKF(strcmp(l->workspace[i].name, ws[i]) == 0, "workspace %d is %s, want %s", i,
                   l->workspace[i].name, ws[i]);
    }
    if (st == TAILOR_OK)
        tailor_plan_free(&p);
    remove_file("order.lua");
}

/* The ops spaces declare are remembered by their text: a file rewritten to declare another op
 * is found under the new one at once, and no longer under the old. */
static void test_find_for_op_follows_text(tailor_ctx *ctx)
{
    write_file("switch.lua", "return { op = 'rmsnorm', source = 'rmsnorm.cu', params = { A = {1} },\n"
                             GOOD_TAIL);
    CHECK(op_lists(ctx, "rmsnorm", "switch"));
    CHECK(op_lists(ctx, "rmsnorm", "switch")); /* asked again: the remembered answer */
    CHECK(!op_lists(ctx, "gelu_gate", "switch"));
    write_file("switch.lua", "return { op = 'gelu_gate', source = 'rmsnorm.cu', params = { A = {1} },\n"
                             GOOD_TAIL);
    CHECK(!op_lists(ctx, "rmsnorm", "switch"));
    CHECK(op_lists(ctx, "gelu_gate", "switch"));
    CHECK(op_lists(ctx, "rmsnorm", "rmsnorm")); /* the built-in, still */
    remove_file("switch.lua");
    CHECK(!op_lists(ctx, "gelu_gate", "switch"));
}

/* An experimental template is planned only with TAILOR_EXPERIMENTAL=1, and says why it is out;
 * `experimental` must be that sentence. */
static void test_experimental(tailor_ctx *ctx)
{
    char before[65] = "", hidden[65] = "", admitted[65] = "";
    unsetenv("TAILOR_EXPERIMENTAL");
    CHECK_OK(ctx, tailor_plan_space_hash(ctx, "rmsnorm", before));
    write_file("rmsnorm_exp.lua",
               "return { op = 'rmsnorm', source = 'rmsnorm.cu', params = { THREADS = { 96 }, VEC = { 1 } },\n"
               "  experimental = 'not yet run on a GPU',\n"
               "  threads = function(p) return p.THREADS end, smem_static = 0, smem_dynamic = 0,\n"
               "  grid = function(p, s) return { s.rows } end,\n"
               "  args = { 'out', 'x', 'w', { i32 = 'cols' }, { f32 = 1e-6 } },\n}\n");
    unsetenv("TAILOR_EXPERIMENTAL");
    tailor_plan p;
    CHECK_OK(ctx, plan_for(ctx, "h200", "rmsnorm", "rows=8,cols=512", TAILOR_DTYPE_BF16, &p));
    const tailor_plan_entry *e = find_entry(&p, "rmsnorm_exp", "THREADS=96 VEC=1");
    CHECK(e && e->verdict == TAILOR_REFUSED_EXPERIMENTAL &&
          strstr(e->reason, "template rmsnorm_exp is experimental (not yet run on a GPU); "
                            "TAILOR_EXPERIMENTAL=1 includes it"));
    CHECK(tailor_plan_survivors(&p) > 0); /* the embedded template still plans */
    /* left out, the experimental template takes no part in the op's hash: the cached winners'
     * key is the one before it came (and the plan's is the lookup's) */
    CHECK_OK(ctx, tailor_plan_space_hash(ctx, "rmsnorm", hidden));
    CHECKF(strcmp(hidden, before) == 0 && strcmp(p.space_hash, hidden) == 0,
           "an experimental template left out changed rmsnorm's hash");
    tailor_plan_free(&p);
    setenv("TAILOR_EXPERIMENTAL", "1", 1);
    CHECK_OK(ctx, plan_for(ctx, "h200", "rmsnorm", "rows=8,cols=512", TAILOR_DTYPE_BF16, &p));
    e = find_entry(&p, "rmsnorm_exp", "THREADS=96 VEC=1");
    CHECK(e && e->verdict == TAILOR_FITS);
    /* admitted, it is among the candidates: winners tuned so are kept under another key */
    CHECK_OK(ctx, tailor_plan_space_hash(ctx, "rmsnorm", admitted));
    CHECKF(strcmp(admitted, before) != 0 && strcmp(p.space_hash, admitted) == 0,
           "an admitted experimental template left rmsnorm's hash as it was");
    tailor_plan_free(&p);
    unsetenv("TAILOR_EXPERIMENTAL");
    remove_file("rmsnorm_exp.lua");
    write_file("expnum.lua", "return { op = 'rmsnorm', source = 'rmsnorm.cu', params = { A = {1} },\n"
                             "  experimental = 3,\n" GOOD_TAIL);
    expect_broken(ctx, "expnum", "expnum.lua", "'experimental' must be a sentence");
    remove_file("expnum.lua");
}

/* A variant dropped into TAILOR_TEMPLATE_PATH: its smem grows with BM and the width, like an
 * attention tile, so the T4 refuses the big one with the arithmetic. */
static void test_variant_and_budget(tailor_ctx *ctx)
{
    write_file("rmsnorm_tiled.lua",
               "return { op = 'rmsnorm', source = 'rmsnorm.cu', dtypes = { 'fp16', 'bf16' },\n"
               "  params = { THREADS = { 128 }, VEC = { 2 }, BM = { 16, 64 }, WIDE = { 0, 1 } },\n"
               "  requires = function(p, s, dtype) return dtype == 'bf16' and { 'bf16' } or {} end,\n"
               "  threads = function(p) return p.WIDE == 1 and 2048 or p.THREADS end,\n"
               "  smem_static = function(p) return 16 end,\n"
               "  smem_dynamic = function(p, s) return p.BM * s.cols * 3 - 16 end,\n"
               "  grid = function(p, s) return { s.rows } end,\n"
               "  args = { 'out', 'x', 'w', { i32 = 'cols' }, { f32 = 1e-6 } },\n}\n");
    tailor_plan p;
    CHECK_OK(ctx, plan_for(ctx, "t4", "rmsnorm", "rows=8,cols=512", TAILOR_DTYPE_F16, &p));
    CHECK(p.ntemplates >= 2); /* the embedded one and the variant */
    const tailor_plan_entry *big = find_entry(&p, "rmsnorm_tiled", "BM=64 THREADS=128 VEC=2 WIDE=0");
    const tailor_plan_entry *small = find_entry(&p, "rmsnorm_tiled", "BM=16 THREADS=128 VEC=2 WIDE=0");
    const tailor_plan_entry *wide = find_entry(&p, "rmsnorm_tiled", "BM=16 THREADS=128 VEC=2 WIDE=1");
    CHECK(big && small && wide);
    if (big && small && wide) {
        printf("refused: %s\n", big->reason);
        CHECK(big->verdict == TAILOR_REFUSED_SMEM);
        CHECK(strstr(big->reason, "needs 98,304 B shared memory per block; Tesla T4 (sm_75) "
                                  "allows 65,536 B (1.5x over)") != NULL);
        CHECK(small->verdict == TAILOR_FITS);
        CHECK(wide->verdict == TAILOR_REFUSED_THREADS);
        CHECK(strstr(wide->reason, "needs 2048 threads per block") != NULL);
    }
    char first_hash[65];
    memcpy(first_hash, p.space_hash, sizeof first_hash);
    tailor_plan_free(&p);

    /* the same variant on an H200 fits; bf16 on the T4 is refused for its datapath */
    CHECK_OK(ctx, plan_for(ctx, "h200", "rmsnorm", "rows=8,cols=512", TAILOR_DTYPE_BF16, &p));
    big = find_entry(&p, "rmsnorm_tiled", "BM=64 THREADS=128 VEC=2 WIDE=0");
    CHECK(big && big->verdict == TAILOR_FITS);
    tailor_plan_free(&p);
    CHECK_OK(ctx, plan_for(ctx, "t4", "rmsnorm", "rows=8,cols=512", TAILOR_DTYPE_BF16, &p));
    CHECK(tailor_plan_survivors(&p) == 0);
    small = find_entry(&p, "rmsnorm_tiled", "BM=16 THREADS=128 VEC=2 WIDE=0");
    CHECK(small && small->verdict == TAILOR_REFUSED_FEATURE &&
          strstr(small->reason, "needs bf16 (sm_80 or newer); Tesla T4 (sm_75) lacks it"));
    tailor_plan_free(&p);

    /* the TPU profile: only the scratch-memory arithmetic, against VMEM */
    CHECK_OK(ctx, plan_for(ctx, "tpu-v5e", "rmsnorm", "rows=8,cols=1048576", TAILOR_DTYPE_BF16, &p));
    big = find_entry(&p, "rmsnorm_tiled", "BM=64 THREADS=128 VEC=2 WIDE=0");
    CHECK(big && big->verdict == TAILOR_REFUSED_SMEM && strstr(big->reason, "VMEM per core"));
    tailor_plan_free(&p);

    /* editing the variant changes the op's space hash (so only its winners are retuned) */
    write_file("rmsnorm_tiled.lua",
               "return { op = 'rmsnorm', source = 'rmsnorm.cu', params = { THREADS = { 64 }, VEC = { 1 } },\n"
               "  threads = function(p) return p.THREADS end, smem_static = 8, smem_dynamic = 0,\n"
               "  grid = function(p, s) return { s.rows } end,\n"
               "  args = { 'out', 'x', 'w', { i32 = 'cols' }, { f32 = 1e-6 } },\n}\n");
    CHECK_OK(ctx, plan_for(ctx, "t4", "rmsnorm", "rows=8,cols=512", TAILOR_DTYPE_F16, &p));
    CHECK(strcmp(first_hash, p.space_hash) != 0);
    tailor_plan_free(&p);
}

static void test_plan_errors(tailor_ctx *ctx)
{
    tailor_plan p;
    CHECK(plan_for(ctx, "t4", "no_such_op", "rows=1", TAILOR_DTYPE_F16, &p) == TAILOR_ERR_NOT_FOUND);
    CHECK(strstr(tailor_ctx_message(ctx), "op 'no_such_op' is unknown (known ops: rmsnorm"));
    CHECK(plan_for(ctx, "t4", "rmsnorm", "rows=1", TAILOR_DTYPE_F16, &p) == TAILOR_ERR_MISUSE);
    CHECK(strstr(tailor_ctx_message(ctx), "needs shape key 'cols'"));
    CHECK(plan_for(ctx, "t4", "rmsnorm", "rows=1,cols=2,heads=3", TAILOR_DTYPE_F16, &p) ==
          TAILOR_ERR_MISUSE);
    CHECK(strstr(tailor_ctx_message(ctx), "no shape key 'heads'"));
    tailor_shape s;
    CHECK(tailor_shape_parse(ctx, "m=1,m=2", &s) == TAILOR_ERR_MISUSE);
    CHECK(tailor_shape_parse(ctx, "m=-1", &s) == TAILOR_ERR_MISUSE);
    CHECK(tailor_shape_parse(ctx, "m1", &s) == TAILOR_ERR_MISUSE);
    /* an override that declares another op hides the built-in: the message names the file */
    write_file("gelu_gate.lua", "return { op = 'rmsnorm', source = 'rmsnorm.cu', params = { A = {1} },\n"
                                GOOD_TAIL);
    CHECK(plan_for(ctx, "t4", "gelu_gate", "rows=1,inter=64", TAILOR_DTYPE_F16, &p) ==
          TAILOR_ERR_NOT_FOUND);
    char hid[600];
    snprintf(hid, sizeof hid, "no template implements op 'gelu_gate' (%s/gelu_gate.lua declares "
             "op 'rmsnorm' and hides the built-in gelu_gate.lua)", dir);
    CHECKF(strcmp(tailor_ctx_message(ctx), hid) == 0, "%s", tailor_ctx_message(ctx));
    remove_file("gelu_gate.lua");
    CHECK_OK(ctx, plan_for(ctx, "t4", "gelu_gate", "rows=1,inter=64", TAILOR_DTYPE_F16, &p));
    tailor_plan_free(&p);
    CHECK(tailor_shape_parse(ctx, "rows=16,cols=99999999999999999999", &s) == TAILOR_ERR_MISUSE);
    CHECK(strstr(tailor_ctx_message(ctx), "value of 'cols' is too large (the largest allowed is "
                                          "2147483647)"));
    CHECK(tailor_shape_parse(ctx, "m=2147483648", &s) == TAILOR_ERR_MISUSE);
    CHECK_OK(ctx, tailor_shape_parse(ctx, "m=2147483647", &s));
    CHECK(s.count == 1 && s.dims[0].value == 2147483647);
}

/* What space says for one configuration (JSON) at a shape, for bf16 on the H200 profile; at
 * launch or at plan time. 0 when the space could not be evaluated (the checks say why). */
static int evaluate(tailor_ctx *ctx, const char *space, const char *cfg_json,
                    const char *shape_text, int at_launch, tailor_launch *l)
{
    tailor_space *s = NULL;
    tailor_config cfg;
    tailor_shape shape;
    CHECK_OK(ctx, tailor_space_load(ctx, space, &s));
    CHECK_OK(ctx, tailor_config_parse_json(ctx, cfg_json, &cfg));
    CHECK_OK(ctx, tailor_shape_parse(ctx, shape_text, &shape));
    if (!s)
        return 0;
    const tailor_op *op = tailor_op_find(tailor_space_op(s));
    CHECK(op && tailor_op_complete_shape(ctx, op, &shape) == TAILOR_OK);
    tailor_status st = tailor_space_evaluate(ctx, s, &cfg, &shape, TAILOR_DTYPE_BF16,
                                             tailor_device_profile_find("h200"), at_launch, l);
    CHECK_OK(ctx, st);
    tailor_space_destroy(s);
    return st == TAILOR_OK;
}

/* `valid`'s purpose: a winner chosen at the prefill chunk (matmul_mma BM=128 at m=512; the GEMV
 * with MT=8 at m=8) runs narrower widths at launch, while choosing for those widths still prunes
 * it, and a rule of correctness holds at launch too (the wide W4A16 GEMV stages MP rows). */
static void expect_valid(tailor_ctx *ctx, const char *space, const char *cfg_json,
                         const char *shape_text, int at_launch, int want)
{
    tailor_launch l;
    if (!evaluate(ctx, space, cfg_json, shape_text, at_launch, &l))
        return;
    CHECKF(l.valid == want, "%s %s at %s (%s): valid=%d, want %d (%s)", space, cfg_json,
           shape_text, at_launch ? "launch" : "plan", l.valid, want, l.invalid_reason);
}

/* A configuration refused at a shape (on the H200 profile) with a reason containing `why`. */
static void expect_refused(tailor_ctx *ctx, const char *space, const char *cfg_json,
                           const char *shape_text, int at_launch, const char *why)
{
    tailor_launch l;
    if (!evaluate(ctx, space, cfg_json, shape_text, at_launch, &l))
        return;
    CHECKF(!l.valid && strstr(l.invalid_reason, why), "%s %s at %s: valid=%d (%s), want \"%s\"",
           space, cfg_json, shape_text, l.valid, l.invalid_reason, why);
}

static void test_launch_purpose(tailor_ctx *ctx)
{
    const char *mma = "{\"BK\":32,\"BM\":128,\"BN\":64,\"SPLITK\":1,\"STAGES\":4,\"WM\":2,\"WN\":2}";
    expect_valid(ctx, "matmul_mma", mma, "m=512,n=2048,k=1536", 0, 1);
    expect_valid(ctx, "matmul_mma", mma, "m=37,n=2048,k=1536", 0, 0);
    expect_valid(ctx, "matmul_mma", mma, "m=37,n=2048,k=1536", 1, 1);
    const char *gemv = "{\"KWARPS\":1,\"MT\":8,\"ROWS\":1,\"THREADS\":256,\"UNROLL\":1}";
    expect_valid(ctx, "matmul_gemv", gemv, "m=3,n=512,k=64", 0, 0);
    expect_valid(ctx, "matmul_gemv", gemv, "m=3,n=512,k=64", 1, 1);
    const char *wide = "{\"MP\":4,\"RT\":1,\"SPLITK\":2,\"UNROLL\":4,\"WARPS\":4}";
    expect_valid(ctx, "w4a16_gemv_wide", wide, "m=3,n=2048,k=1536,group=128", 1, 1);
    expect_valid(ctx, "w4a16_gemv_wide", wide, "m=2,n=2048,k=1536,group=128", 0, 0);
    expect_valid(ctx, "w4a16_gemv_wide", wide, "m=2,n=2048,k=1536,group=128", 1, 1);
    expect_valid(ctx, "w4a16_gemv_wide", wide, "m=5,n=2048,k=1536,group=128", 1, 0);
    /* the transposed W4A16 decode: MT n8 tiles hold m; the fewest when choosing, at least m at
     * launch; at most 16 rows */
    const char *wt = "{\"MT\":2,\"RT\":1,\"SPLITK\":3,\"UNROLL\":2,\"WK\":1,\"WR\":4}";
    expect_valid(ctx, "w4a16_gemv_t", wt, "m=12,n=6144,k=1536,group=128", 0, 1);
    expect_valid(ctx, "w4a16_gemv_t", wt, "m=3,n=6144,k=1536,group=128", 0, 0);
    expect_valid(ctx, "w4a16_gemv_t", wt, "m=3,n=6144,k=1536,group=128", 1, 1);
    expect_valid(ctx, "w4a16_gemv_t", wt, "m=17,n=6144,k=1536,group=128", 1, 0);
    /* a full layer's decode attention is tuned on 4096 slots and runs every shorter cache */
    const char *att = "{\"ASYNC\":1,\"BN\":64,\"MMA_K\":16,\"SPLITS\":66,\"STAGES\":2,\"WN\":4}";
    const char *full = "batch=1,head_dim=512,heads=8,kv_heads=1,window=0,kv_len=";
    char at[160];
    snprintf(at, sizeof at, "%s4096", full);
    expect_valid(ctx, "attention_decode", att, at, 0, 1);
    snprintf(at, sizeof at, "%s10", full);
    expect_valid(ctx, "attention_decode", att, at, 0, 0);
    expect_valid(ctx, "attention_decode", att, at, 1, 1);
    const char *aw = "{\"ASYNC\":1,\"BN\":16,\"KW\":2,\"MMA_K\":16,\"QWAVES\":4,\"STAGES\":2,\"WN\":2}";
    snprintf(at, sizeof at, "%s4096", full);
    expect_valid(ctx, "attention_decode_wide", aw, at, 0, 1);
    snprintf(at, sizeof at, "%s10", full);
    expect_valid(ctx, "attention_decode_wide", aw, at, 0, 0);
    expect_valid(ctx, "attention_decode_wide", aw, at, 1, 1);
}

/* The launch of a configuration as a text: "threads smem grid | arg arg ..." (buffers by name,
 * scalars as i:value or f:value), for comparing what a space hands the kernel. */
static void launch_text_at(tailor_ctx *ctx, const char *space, const char *cfg_json,
                           const char *shape_text, int at_launch, char *out, size_t size)
{
    tailor_launch l;
    out[0] = 0;
    if (!evaluate(ctx, space, cfg_json, shape_text, at_launch, &l) || !l.valid)
        return;
    size_t n = (size_t)snprintf(out, size, "%d %lld %u |", l.threads, l.smem_static, l.grid[0]);
    for (int a = 0; a < l.nargs && n < size; a++) {
        const tailor_arg *g = &l.args[a];
        n += (size_t)(g->kind == TAILOR_ARG_BUFFER ? snprintf(out + n, size - n, " %s", g->name)
                      : g->kind == TAILOR_ARG_F32  ? snprintf(out + n, size - n, " f:%g", g->f)
                                                   : snprintf(out + n, size - n, " i:%lld", g->i));
    }
}

static void launch_text(tailor_ctx *ctx, const char *space, const char *cfg_json,
                        const char *shape_text, char *out, size_t size)
{
    launch_text_at(ctx, space, cfg_json, shape_text, 0, out, size);
}

/* The seam prologue's spaces hand their kernels the arguments in the order of the templates'
 * signatures (matmul_gemv.cu, w4a16_gemv.cu with PRO), with the shared memory of the GEMV, the
 * row and the reduction scratch; matmul_pro on the test device (sm_90) also stages the norm
 * weights with cp.async: 4 k + 16 bytes more (3,168 + 6,160). */
static void test_prologue_launch(tailor_ctx *ctx)
{
    char got[600];
    launch_text(ctx, "matmul_pro", "{\"KWARPS\":2,\"MT\":1,\"ROWS\":2,\"THREADS\":256,\"UNROLL\":1}",
                "m=1,n=256,k=1536,mode=2,glu=2,u_ld=8960", got, sizeof got);
    CHECKF(strcmp(got, "256 9328 32 | out t w u i:8960 t x_in x_out y w_post w_next scalar "
                       "f:1e-06 i:1 i:256 i:1536") == 0, "matmul_pro launch: %s", got);
    launch_text(ctx, "w4a16_pro", "{\"KWARPS\":1,\"MT\":1,\"ROWS\":2,\"THREADS\":128}",
                "m=1,n=200,k=352,group=32,zp=1,mode=1", got, sizeof got);
    CHECKF(strcmp(got, "128 720 25 | out t qweight scales zeros t x_in x_out y w_post w_next "
                       "scalar f:1e-06 i:1 i:200 i:352 i:208") == 0, "w4a16_pro launch: %s", got);
}

/* Decode attention with prep = 1 appends q_w, inv_freq and eps to both templates' arguments
 * (ATTN_PREP_PARAMS); prep = 0 hands neither. A W4A16 part of a stack passes the stack's scale
 * row stride where a whole matrix passes its own n rounded up to 16. */
static void test_stride_and_prep_launch(tailor_ctx *ctx)
{
    char got[600];
    const char *dec = "kv_len=512,head_dim=256,heads=8,kv_heads=1,window=512,batch=1,prep=";
    const char *v1 = "{\"ASYNC\":1,\"BN\":64,\"MMA_K\":16,\"SPLITS\":8,\"STAGES\":2,\"WN\":4}";
    char shape[160];
    snprintf(shape, sizeof shape, "%s1", dec);
    launch_text(ctx, "attention_decode", v1, shape, got, sizeof got);
    CHECKF(strstr(got, "| out q k_cache v_cache positions qpos ws cnt i:8 i:1 i:512 i:512 i:64 "
                       "q_w inv_freq f:1e-06") != NULL, "attention_decode prep=1 launch: %s", got);
    snprintf(shape, sizeof shape, "%s0", dec);
    launch_text(ctx, "attention_decode", v1, shape, got, sizeof got);
    CHECKF(strstr(got, "i:64") != NULL && strstr(got, "q_w") == NULL,
           "attention_decode prep=0 launch: %s", got);
    const char *wide = "{\"ASYNC\":1,\"BN\":16,\"KW\":2,\"MMA_K\":16,\"QWAVES\":4,\"STAGES\":2,"
                       "\"WN\":2}";
    launch_text(ctx, "attention_decode_wide", wide,
                "kv_len=4096,head_dim=512,heads=8,kv_heads=1,window=0,batch=1,prep=1", got,
                sizeof got);
    const char *tail = " q_w inv_freq f:1e-06";
    size_t len = strlen(got), tl = strlen(tail);
    CHECKF(len > tl && strcmp(got + len - tl, tail) == 0,
           "attention_decode_wide prep=1 launch ends with q_w inv_freq eps: %s", got);
    /* w4a16_gemv_t: 4 warps of one 16-row tile each (64 rows a block, 96 blocks), the k
     * warps' sums in static shared memory (WK x 8 x 64 floats), split-k buffers, the stride */
    const char *wt = "{\"MT\":1,\"RT\":1,\"SPLITK\":3,\"UNROLL\":2,\"WK\":1,\"WR\":4}";
    launch_text(ctx, "w4a16_gemv_t", wt, "m=1,n=6144,k=1536,group=128,s_ld=12288", got,
                sizeof got);
    CHECKF(strcmp(got, "128 2048 96 | out a qweight scales partial counters i:1 i:6144 i:1536 "
                       "i:12288") == 0, "w4a16_gemv_t launch: %s", got);
    expect_valid(ctx, "w4a16_gemv_t", wt, "m=1,n=6144,k=1536,group=128", 0, 1);
    /* 12 quads over 3 slices: 4 per warp, two batches of UNROLL=2; over 12 slices one quad per
     * warp, less than a batch */
    expect_valid(ctx, "w4a16_gemv_t", "{\"MT\":1,\"RT\":1,\"SPLITK\":12,\"UNROLL\":2,\"WK\":1,"
                 "\"WR\":4}", "m=1,n=6144,k=1536,group=128", 0, 0);
    /* RT=2 only with UNROLL=2, four warps a block */
    expect_valid(ctx, "w4a16_gemv_t", "{\"MT\":1,\"RT\":2,\"SPLITK\":3,\"UNROLL\":1,\"WK\":1,"
                 "\"WR\":4}", "m=1,n=6144,k=1536,group=128", 0, 0);
    expect_valid(ctx, "w4a16_gemv_t", "{\"MT\":1,\"RT\":1,\"SPLITK\":3,\"UNROLL\":2,\"WK\":1,"
                 "\"WR\":2}", "m=1,n=6144,k=1536,group=128", 0, 0);
    const char *gemv = "{\"KWARPS\":2,\"MT\":1,\"ROWS\":2,\"THREADS\":256}";
    launch_text(ctx, "w4a16_gemv", gemv, "m=1,n=2048,k=1536,group=128,s_ld=2560", got, sizeof got);
    CHECKF(strstr(got, "i:1 i:2048 i:1536 i:2560") != NULL, "w4a16 part launch: %s", got);
    launch_text(ctx, "w4a16_gemv", gemv, "m=1,n=200,k=1536,group=128", got, sizeof got);
    CHECKF(strstr(got, "i:1 i:200 i:1536 i:208") != NULL, "w4a16 whole launch: %s", got);
}

/* attention_decode_wg hands its kernel wide's arguments: the split of 32k slots
 * over a wave of 132 SMs (128 blocks of 256 slots), the merge tree's fan-in 12 (12^2 >= 128),
 * its 139 stored nodes (128 leaves, 11 parents) and 12 counters; one warpgroup, no static shared
 * memory. prep = 1 and 16 heads a KV head are refused; short caches (E2B's 512-slot ring) are
 * planned too. */
static void test_decode_wg_launch(tailor_ctx *ctx)
{
    char got[600];
    const char *cfg = "{\"BN\":32,\"QWAVES\":4,\"SPREAD\":0,\"STAGES\":3}";
    launch_text(ctx, "attention_decode_wg", cfg,
                "kv_len=32768,head_dim=512,heads=8,kv_heads=1,window=0,batch=1", got, sizeof got);
    CHECKF(strcmp(got, "128 0 128 | out q k_cache v_cache positions qpos ws cnt i:8 i:1 i:32768 "
                       "i:0 i:256 i:12 i:139 i:12") == 0, "attention_decode_wg launch: %s", got);
    expect_valid(ctx, "attention_decode_wg", cfg,
                 "kv_len=32768,head_dim=512,heads=8,kv_heads=1,window=0,batch=1,prep=1", 1, 0);
    expect_valid(ctx, "attention_decode_wg", cfg,
                 "kv_len=32768,head_dim=512,heads=16,kv_heads=1,window=0,batch=1", 1, 0);
    expect_valid(ctx, "attention_decode_wg", cfg,
                 "kv_len=512,head_dim=256,heads=8,kv_heads=1,window=512,batch=1", 0, 1);
    expect_valid(ctx, "attention_decode_wg", cfg,
                 "kv_len=512,head_dim=256,heads=8,kv_heads=1,window=512,batch=1", 1, 1);
    /* SPREAD = 1: level-1 groups of 4 leaves, whose 32 mergers share the root (at most 32, and
     * half the SMs over all pairs): 160 nodes (128 leaves, 32 level-1), 34 counters (32 groups,
     * the root's arrivals and leavers); refused where the pairs leave no two mergers, and where a
     * short split makes one level-1 node */
    const char *spread = "{\"BN\":32,\"QWAVES\":4,\"SPREAD\":1,\"STAGES\":3}";
    launch_text(ctx, "attention_decode_wg", spread,
                "kv_len=32768,head_dim=512,heads=8,kv_heads=1,window=0,batch=1", got, sizeof got);
    CHECKF(strstr(got, " i:256 i:4 i:160 i:34") != NULL, "attention_decode_wg SPREAD=1: %s", got);
    expect_refused(ctx, "attention_decode_wg", spread,
                   "kv_len=32768,head_dim=256,heads=80,kv_heads=40,window=0,batch=1", 1,
                   "SPREAD=1: 40 pairs leave fewer than 2 root mergers within half of 132 SMs");
    expect_refused(ctx, "attention_decode_wg", spread,
                   "kv_len=96,head_dim=256,heads=8,kv_heads=1,window=0,batch=1", 1,
                   "SPREAD=1: 3 blocks make one level-1 node");
    /* SPREAD = 2: one level over the 128 leaves (two counters: arrivals, leavers), only where the
     * whole grid is one wave: two quarter-waves too many (QWAVES = 8) are refused */
    const char *flat = "{\"BN\":32,\"QWAVES\":4,\"SPREAD\":2,\"STAGES\":3}";
    launch_text(ctx, "attention_decode_wg", flat,
                "kv_len=32768,head_dim=512,heads=8,kv_heads=1,window=0,batch=1", got, sizeof got);
    CHECKF(strstr(got, " i:256 i:128 i:128 i:2") != NULL, "attention_decode_wg SPREAD=2: %s", got);
    expect_refused(ctx, "attention_decode_wg", "{\"BN\":32,\"QWAVES\":8,\"SPREAD\":2,\"STAGES\":3}",
                   "kv_len=32768,head_dim=512,heads=8,kv_heads=1,window=0,batch=1", 1,
                   "SPREAD=2: 1 pairs x 256 blocks exceed one wave of 132 SMs");
}

/* The value of define `name` in a launch (parameters and the space's defines), or -1. */
static int define_int(const tailor_launch *l, const char *name)
{
    for (int i = 0; i < l->ndefines; i++)
        if (strcmp(l->defines[i].name, name) == 0)
            return atoi(l->defines[i].value);
    return -1;
}

static int has_feature(const tailor_launch *l, const char *feature)
{
    for (int i = 0; i < l->nfeatures; i++)
        if (strcmp(l->features[i], feature) == 0)
            return 1;
    return 0;
}

/* w4a16_gemv_t's TRIM (a warp's last, partial batch shortened to its quads) only where a warp
 * has more quads than a batch and not whole batches: k = 1536 is 12 quads, three a warp at WK = 4
 * (a batch of 2 and one of 1), six at WK = 2 (three whole batches of 2: refused), gated too. */
static void test_trim(tailor_ctx *ctx)
{
    const char *sh = "m=1,n=6144,k=1536,group=128";
    expect_valid(ctx, "w4a16_gemv_t",
                 "{\"ASMEM\":1,\"MT\":1,\"RT\":1,\"SPLITK\":1,\"TRIM\":1,\"UNROLL\":2,"
                 "\"WK\":4,\"WR\":1}", sh, 0, 1);
    expect_valid(ctx, "w4a16_glu_t",
                 "{\"ASMEM\":0,\"MT\":1,\"RT\":2,\"SPLITK\":1,\"TRIM\":1,\"UNROLL\":2,"
                 "\"WK\":4,\"WR\":1}", sh, 0, 1);
    expect_refused(ctx, "w4a16_gemv_t",
                   "{\"ASMEM\":1,\"MT\":1,\"RT\":1,\"SPLITK\":1,\"TRIM\":1,\"UNROLL\":2,"
                   "\"WK\":2,\"WR\":2}", sh, 0,
                   "TRIM=1: 6 quads per warp in batches of 2 (nothing to trim)");
    tailor_launch l;
    if (evaluate(ctx, "w4a16_gemv_t",
                 "{\"ASMEM\":1,\"MT\":1,\"RT\":1,\"SPLITK\":1,\"TRIM\":0,\"UNROLL\":2,"
                 "\"WK\":2,\"WR\":2}", sh, 0, &l))
        CHECKF(l.valid && define_int(&l, "TRIM") == 0, "TRIM=0 at UNROLL=2: valid=%d (%s)",
               l.valid, l.invalid_reason);
}

/* Decode attention's cluster merge (CLUSTER = 1, sm_90: the blocks of a (sequence, KV head) are
 * one cluster whose size is compiled in as CLUSTER_X). On the H200 a 512-slot ring keeps
 * CLUSTER=1 survivors whose CLUSTER_X is their grid's x, 2..8, needing the "cluster" feature;
 * splits of 1 and of 32 blocks are refused with the numbers; a linear cache keeps them too, and
 * a winner tuned at one length launches SPLITS blocks (the compiled cluster) at any other; with
 * many (sequence, KV head) pairs only the most blocks within one wave are tried (pruning only); the T4 never gets CLUSTER=1, and one forced on it is refused
 * for the feature. The arguments stay those of CLUSTER=0. */
static void test_decode_cluster(tailor_ctx *ctx)
{
    const char *ring = "kv_len=512,head_dim=256,heads=8,kv_heads=1,window=512,batch=1";
    CHECK(tailor_feature_min_sm("cluster") == 90);
    tailor_plan p;
    CHECK_OK(ctx, plan_for(ctx, "h200", "attention_decode", ring, TAILOR_DTYPE_BF16, &p));
    int fit = 0, one = 0, sixteen = 0;
    for (int i = 0; i < p.nentries; i++) {
        const tailor_plan_entry *e = &p.entries[i];
        if (strcmp(e->template_name, "attention_decode") != 0 ||
            define_int(&e->launch, "CLUSTER") != 1)
            continue;
        int x = define_int(&e->launch, "CLUSTER_X");
        unsigned gx = e->launch.grid[0];
        if (e->verdict == TAILOR_FITS) {
            fit++;
            CHECKF(x == (int)gx && x >= 2 && x <= 8, "CLUSTER=1 survivor: CLUSTER_X=%d, grid x %u",
                   x, gx);
            CHECK(has_feature(&e->launch, "cluster"));
        } else if (strstr(e->reason, "CLUSTER=1 needs 2 to 8 blocks per (sequence, KV head)")) {
            CHECKF(e->verdict == TAILOR_REFUSED_SHAPE && (x < 2 || x > 8), /* no grid: refused */
                   "refused with CLUSTER_X=%d: %s", x, e->reason);
            one += strstr(e->reason, "(a portable cluster); SPLITS=1") != NULL;
            sixteen += strstr(e->reason, "(a portable cluster); SPLITS=32") != NULL;
        }
    }
    CHECKF(fit >= 4 && one >= 1 && sixteen >= 1,
           "h200 ring: %d CLUSTER=1 survivors, %d refused at 1 block, %d at 32", fit, one, sixteen);
    const tailor_plan_entry *e =
        find_entry(&p, "attention_decode", "ASYNC=1 BN=64 CLUSTER=1 FLAT=0 MMA_K=16 SPLITS=8 STAGES=2 WN=4");
    CHECK(e && e->verdict == TAILOR_FITS && e->launch.grid[0] == 8 &&
          define_int(&e->launch, "CLUSTER_X") == 8);
    e = find_entry(&p, "attention_decode", "ASYNC=1 BN=64 CLUSTER=0 FLAT=0 MMA_K=16 SPLITS=8 STAGES=2 WN=4");
    CHECK(e && e->verdict == TAILOR_FITS && define_int(&e->launch, "CLUSTER_X") == -1 &&
          !has_feature(&e->launch, "cluster"));
    tailor_plan_free(&p);

    /* the T4: no CLUSTER=1 candidate at all, survivors still */
    CHECK_OK(ctx, plan_for(ctx, "t4", "attention_decode", ring, TAILOR_DTYPE_F16, &p));
    int t4_cluster = 0;
    for (int i = 0; i < p.nentries; i++)
        t4_cluster += define_int(&p.entries[i].launch, "CLUSTER") == 1;
    CHECKF(tailor_plan_survivors(&p) > 0 && t4_cluster == 0,
           "t4 ring: %d survivors, %d CLUSTER=1 candidates", tailor_plan_survivors(&p), t4_cluster);
    tailor_plan_free(&p);

    /* forced on the T4, the feature refuses it */
    tailor_space *s = NULL;
    tailor_config cfg;
    tailor_shape shape;
    tailor_launch l;
    CHECK_OK(ctx, tailor_space_load(ctx, "attention_decode", &s));
    CHECK_OK(ctx, tailor_config_parse_json(ctx, "{\"ASYNC\":0,\"BN\":16,\"CLUSTER\":1,\"MMA_K\":8,"
                                           "\"SPLITS\":8,\"STAGES\":1,\"WN\":2}", &cfg));
    CHECK_OK(ctx, tailor_shape_parse(ctx, ring, &shape));
    const tailor_device_info *t4 = tailor_device_profile_find("t4");
    if (s && t4 && tailor_op_complete_shape(ctx, tailor_op_find("attention_decode"), &shape) == TAILOR_OK &&
        tailor_space_evaluate(ctx, s, &cfg, &shape, TAILOR_DTYPE_F16, t4, 0, &l) == TAILOR_OK) {
        char why[512];
        tailor_verdict v = tailor_budget_check(t4, "attention_decode", s, &cfg, TAILOR_DTYPE_F16,
                                               &l, why, sizeof why);
        CHECKF(l.valid && v == TAILOR_REFUSED_FEATURE &&
               strstr(why, "needs cluster (sm_90 or newer); Tesla T4 (sm_75) lacks it"),
               "CLUSTER=1 forced on the T4: %s (%s)", tailor_verdict_name(v), why);
    } else {
        CHECKF(0, "could not evaluate CLUSTER=1 on the T4: %s", tailor_ctx_message(ctx));
    }
    tailor_space_destroy(s);

    /* a linear cache: kept, and launched at another length with the same 8 blocks (the
     * compiled cluster), the chunk covering that length's slots */
    const char *c8 = "{\"ASYNC\":1,\"BN\":64,\"CLUSTER\":1,\"MMA_K\":16,\"SPLITS\":8,\"STAGES\":2,"
                     "\"WN\":4}";
    const char *full = "kv_len=4096,head_dim=512,heads=8,kv_heads=1,window=0,batch=1";
    expect_valid(ctx, "attention_decode", c8, full, 0, 1);
    expect_valid(ctx, "attention_decode", c8, full, 1, 1);
    char got[600];
    launch_text_at(ctx, "attention_decode", c8,
                   "kv_len=641,head_dim=512,heads=8,kv_heads=1,window=0,batch=1", 1, got, sizeof got);
    CHECKF(strstr(got, " 8 | out q k_cache v_cache positions qpos ws cnt i:8 i:1 i:641 i:0 "
                       "i:128") != NULL, "attention_decode CLUSTER=1 at 641 linear slots: %s", got);
    expect_valid(ctx, "attention_decode", c8, ring, 1, 1);
    /* pruning only: with 32 (sequence, KV head) pairs the one split tried is the most blocks
     * that fills its blocks within one wave (3 of the targets 1, 3, 5, 8, 9 at BN=64: 96 blocks
     * on 132 SMs), not 8 */
    const char *gqa = "kv_len=32768,head_dim=256,heads=16,kv_heads=8,window=1024,batch=4";
    expect_valid(ctx, "attention_decode", c8, gqa, 0, 0);
    expect_valid(ctx, "attention_decode", c8, gqa, 1, 1);
    if (evaluate(ctx, "attention_decode", c8, gqa, 0, &l))
        CHECKF(strstr(l.invalid_reason, "CLUSTER=1 with 8 blocks: 3 blocks is the split tried") !=
               NULL, "%s", l.invalid_reason);
    /* the same arguments as without the cluster (the workspace is passed, unused) */
    launch_text(ctx, "attention_decode", c8, ring, got, sizeof got);
    CHECKF(strstr(got, " 8 | out q k_cache v_cache positions qpos ws cnt i:8 i:1 i:512 i:512 "
                       "i:64") != NULL, "attention_decode CLUSTER=1 launch: %s", got);
}

/* The workspace buffer `name` of a launch, in bytes, or -1. */
static long long workspace_bytes(const tailor_launch *l, const char *name)
{
    for (int i = 0; i < l->nworkspace; i++)
        if (strcmp(l->workspace[i].name, name) == 0)
            return l->workspace[i].bytes;
    return -1;
}

/* w4a16_gemv_t's CSPLIT (sm_90: a column tile's split blocks summed in a thread block cluster):
 * no partials or counters among the arguments and no workspace, the "cluster" feature required,
 * and refused, with its sentence, where the split blocks are not a portable cluster. */
static void test_csplit(tailor_ctx *ctx)
{
    char got[600];
    const char *sh = "m=1,n=6144,k=1536,group=128,s_ld=12288";
    const char *cs = "{\"CSPLIT\":1,\"MT\":1,\"RT\":1,\"SPLITK\":3,\"UNROLL\":2,\"WK\":1,"
                     "\"WR\":4}";
    launch_text(ctx, "w4a16_gemv_t", cs, sh, got, sizeof got);
    CHECKF(strcmp(got, "128 2048 96 | out a qweight scales i:1 i:6144 i:1536 i:12288") == 0,
           "w4a16_gemv_t CSPLIT=1 launch: %s", got);
    tailor_launch l;
    if (evaluate(ctx, "w4a16_gemv_t", cs, sh, 0, &l)) {
        CHECKF(l.valid && has_feature(&l, "cluster") && define_int(&l, "CSPLIT") == 1,
               "CSPLIT=1 at SPLITK=3: valid=%d cluster=%d (%s)", l.valid,
               has_feature(&l, "cluster"), l.invalid_reason);
        CHECKF(workspace_bytes(&l, "partial") < 0 && workspace_bytes(&l, "counters") < 0,
               "CSPLIT=1 asks for no split-k workspace (partial %lld, counters %lld)",
               workspace_bytes(&l, "partial"), workspace_bytes(&l, "counters"));
    }
    expect_refused(ctx, "w4a16_gemv_t",
                   "{\"CSPLIT\":1,\"MT\":1,\"RT\":1,\"SPLITK\":1,\"UNROLL\":2,\"WK\":2,"
                   "\"WR\":2}", sh, 0,
                   "CSPLIT=1: SPLITK=1 blocks are not a portable cluster (2 to 8)");
}

/* Decode attention's flat merge (FLAT = 1, any card: every live block waits for the others and
 * merges a slice, attn_merge_flat). The T4 keeps FLAT=1 survivors for the E2B full layer whose
 * grids are one wave of its 40 SMs, and refuses the 64-block split with the numbers; the wait
 * makes that a rule of correctness, so it holds at launch too (the 99 KB A10G has 80 SMs: two
 * sequences of 32 blocks fit, three do not); the counters are two a (sequence, KV head); FLAT
 * and CLUSTER together are refused. */
static void test_decode_flat(tailor_ctx *ctx)
{
    const char *full = "kv_len=1024,head_dim=512,heads=8,kv_heads=1,window=0,batch=1";
    tailor_plan p;
    CHECK_OK(ctx, plan_for(ctx, "t4", "attention_decode", full, TAILOR_DTYPE_F16, &p));
    int fit = 0, wave = 0;
    for (int i = 0; i < p.nentries; i++) {
        const tailor_plan_entry *e = &p.entries[i];
        if (strcmp(e->template_name, "attention_decode") != 0 ||
            define_int(&e->launch, "FLAT") != 1)
            continue;
        if (e->verdict == TAILOR_FITS) {
            fit++;
            CHECKF(e->launch.grid[0] >= 2 && e->launch.grid[0] <= 40 &&
                       workspace_bytes(&e->launch, "cnt") == 8,
                   "t4 FLAT=1 survivor: grid x %u, cnt %lld B", e->launch.grid[0],
                   workspace_bytes(&e->launch, "cnt"));
        }
        wave += strstr(e->reason, "FLAT=1: 1 pairs x 64 blocks exceed one wave of 40 SMs (every "
                                  "block waits for the others)") != NULL;
    }
    CHECKF(fit >= 2 && wave >= 1, "t4 full layer: %d FLAT=1 survivors, %d refused for the wave",
           fit, wave);
    tailor_plan_free(&p);

    const tailor_device_info *a10g = tailor_device_profile_find("a10g");
    tailor_space *s = NULL;
    CHECK_OK(ctx, tailor_space_load(ctx, "attention_decode", &s));
    const char *f32 = "{\"ASYNC\":1,\"BN\":32,\"CLUSTER\":0,\"FLAT\":1,\"MMA_K\":16,\"SPLITS\":40,"
                      "\"STAGES\":2,\"WN\":2}";
    const char *shapes[] = {"kv_len=1024,head_dim=512,heads=8,kv_heads=1,window=0,batch=2",
                            "kv_len=1024,head_dim=512,heads=8,kv_heads=1,window=0,batch=3"};
    for (int i = 0; s && a10g && i < 2; i++) {
        tailor_config cfg;
        tailor_shape shape;
        tailor_launch l;
        CHECK_OK(ctx, tailor_config_parse_json(ctx, f32, &cfg));
        CHECK_OK(ctx, tailor_shape_parse(ctx, shapes[i], &shape));
        if (tailor_op_complete_shape(ctx, tailor_op_find("attention_decode"), &shape) != TAILOR_OK ||
            tailor_space_evaluate(ctx, s, &cfg, &shape, TAILOR_DTYPE_BF16, a10g, 1, &l) != TAILOR_OK) {
            CHECKF(0, "could not evaluate FLAT=1 on the A10G: %s", tailor_ctx_message(ctx));
            continue;
        }
        if (i == 0)
            CHECKF(l.valid && l.grid[0] == 32 && l.grid[2] == 2 && workspace_bytes(&l, "cnt") == 16,
                   "a10g FLAT=1, 2 sequences: valid %d, grid %u x %u, cnt %lld B (%s)", l.valid,
                   l.grid[0], l.grid[2], workspace_bytes(&l, "cnt"), l.invalid_reason);
        else
            CHECKF(!l.valid && strstr(l.invalid_reason, "FLAT=1: 3 pairs x 32 blocks exceed one "
                                                        "wave of 80 SMs"),
                   "a10g FLAT=1, 3 sequences at launch: valid %d (%s)", l.valid, l.invalid_reason);
    }
    tailor_space_destroy(s);

    tailor_launch l;
    if (evaluate(ctx, "attention_decode",
                 "{\"ASYNC\":1,\"BN\":64,\"CLUSTER\":1,\"FLAT\":1,\"MMA_K\":16,\"SPLITS\":8,"
                 "\"STAGES\":2,\"WN\":4}",
                 "kv_len=512,head_dim=256,heads=8,kv_heads=1,window=512,batch=1", 1, &l))
        CHECKF(!l.valid && strstr(l.invalid_reason, "FLAT=1 and CLUSTER=1 are two merges"),
               "FLAT=1 with CLUSTER=1: valid %d (%s)", l.valid, l.invalid_reason);
}

/* The helper library (templates/include/spacelib.lua, the global `tailor`): spaces use it, it is
 * part of their hash, and a broken one is named. */
static void test_space_lib(tailor_ctx *ctx)
{
    tailor_space *s = NULL;
    char before[65], after[65];
    CHECK_OK(ctx, tailor_space_load(ctx, "matmul_gemv", &s));
    CHECK_OK(ctx, tailor_space_hash(ctx, s, before));
    tailor_space_destroy(s);
    /* an override on TAILOR_TEMPLATE_PATH: the embedded text plus a comment */
    tailor_template_file f;
    CHECK_OK(ctx, tailor_template_read(ctx, "include/spacelib.lua", &f));
    char sub[300];
    snprintf(sub, sizeof sub, "%s/include", dir);
    mkdir(sub, 0755);
    size_t n = strlen(f.text);
    char *text = malloc(n + 64);
    CHECK(text != NULL);
    if (text) {
        snprintf(text, n + 64, "-- edited\n%s", f.text);
        write_file("include/spacelib.lua", text);
        free(text);
    }
    tailor_template_file_free(&f);
    CHECK_OK(ctx, tailor_space_load(ctx, "matmul_gemv", &s));
    CHECK_OK(ctx, tailor_space_hash(ctx, s, after));
    CHECKF(strcmp(before, after) != 0, "editing spacelib.lua left matmul_gemv's hash at %s", after);
    tailor_space_destroy(s);
    /* a library that is not Lua: every space fails, naming the library */
    write_file("include/spacelib.lua", "return {\n");
    CHECK(tailor_space_load(ctx, "rmsnorm", &s) == TAILOR_ERR_LUA);
    CHECKF(strstr(tailor_ctx_message(ctx), "spacelib.lua") != NULL, "%s", tailor_ctx_message(ctx));
    char path[600];
    snprintf(path, sizeof path, "%s/include/spacelib.lua", dir);
    unlink(path);
    rmdir(sub);
    CHECK_OK(ctx, tailor_space_load(ctx, "rmsnorm", &s));
    tailor_space_destroy(s);
}

/* tailor.split_neighbours (spacelib): the smallest usable split reaching the warp target and
 * its neighbours, or the two largest usable ones when none reaches it. A probe space keeps
 * exactly the splits the helper returns; cols picks the scenario. */
static void test_split_neighbours(tailor_ctx *ctx)
{
    write_file("splitprobe.lua",
               "local SPLITS = { 1, 2, 3, 4, 6, 8 }\n"
               "return { op = 'rmsnorm', source = 'rmsnorm.cu', params = { S = SPLITS },\n"
               "  valid = function(p, s)\n"
               "    local want = ({ 350, 10000, 350, 0 })[s.cols]\n"
               "    local kept = tailor.split_neighbours(SPLITS,\n"
               "      function(x) return s.cols ~= 3 or x ~= 4 end,\n"
               "      function(x) return 100 * x end, want)\n"
               "    return kept[p.S] == true, 'not kept'\n"
               "  end,\n"
               "  threads = function(p) return 32 end,\n"
               "  smem_static = function(p) return 0 end,\n"
               "  smem_dynamic = function(p) return 0 end,\n"
               "  grid = function(p, s) return { 1 } end,\n"
               "  args = { 'out', 'x', 'w', { i32 = 'cols' }, { f32 = 1e-6 } },\n}\n");
    static const struct {
        int cols;
        const char *kept; /* the splits expected valid, as "S," list */
    } cases[] = {
        {1, "3,4,6,"},  /* 400 warps at S=4 is the first >= 350 */
        {2, "6,8,"},    /* none reaches 10000: the two largest */
        {3, "3,6,8,"},  /* 4 unusable: 6 is the first to reach 350, 3 before it */
        {4, "1,2,"},    /* every split reaches 0: the smallest and the next */
    };
    static const int splits[] = {1, 2, 3, 4, 6, 8};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char got[64] = "", shape[64];
        snprintf(shape, sizeof shape, "rows=1,cols=%d", cases[c].cols);
        for (size_t i = 0; i < sizeof splits / sizeof splits[0]; i++) {
            char cfg[32];
            snprintf(cfg, sizeof cfg, "{\"S\":%d}", splits[i]);
            tailor_launch l;
            if (evaluate(ctx, "splitprobe", cfg, shape, 0, &l) && l.valid)
                snprintf(got + strlen(got), sizeof got - strlen(got), "%d,", splits[i]);
        }
        CHECKF(strcmp(got, cases[c].kept) == 0, "split_neighbours, cols=%d: kept %s, want %s",
               cases[c].cols, got, cases[c].kept);
    }
    char path[600];
    snprintf(path, sizeof path, "%s/splitprobe.lua", dir);
    unlink(path);
}

/* The step trace's recompile (tuner/kernels.c load_traced): a survivor compiled through
 * tailor_launch_compile with TAILOR_TRACE carries the trace records, the clock and the grid id
 * reads; without it, the PTX is the plan's own and has none of them. */
static void test_trace_compile(tailor_ctx *ctx)
{
    tailor_plan plan;
    CHECK_OK(ctx, plan_for(ctx, "h200", "rmsnorm", "rows=8,cols=512", TAILOR_DTYPE_BF16, &plan));
    int i = 0;
    while (i < plan.nentries && plan.entries[i].verdict != TAILOR_FITS)
        i++;
    CHECK(i < plan.nentries);
    if (i < plan.nentries) {
        const tailor_plan_entry *e = &plan.entries[i];
        tailor_define trace = {"TAILOR_TRACE", "1"};
        tailor_compile_result plain, traced, planned;
        CHECK_OK(ctx, tailor_launch_compile(ctx, e->template_name, &e->launch, plan.dtype, 90, 1,
                                            "k_trace", NULL, 0, NULL, &plain));
        CHECK_OK(ctx, tailor_launch_compile(ctx, e->template_name, &e->launch, plan.dtype, 90, 1,
                                            "k_trace", &trace, 1, NULL, &traced));
        CHECK_OK(ctx, tailor_plan_compile(ctx, &plan, i, 90, 1, "k_trace", NULL, &planned));
        const char *p = plain.image, *t = traced.image, *q = planned.image;
        CHECK(p && t && q);
        if (p && t && q) {
            CHECK(strcmp(p, q) == 0);
            CHECK(strstr(p, "tailor_trace_rec") == NULL && strstr(p, "%globaltimer") == NULL);
            CHECK(strstr(t, "tailor_trace_rec") != NULL);
            CHECK(strstr(t, "%globaltimer") != NULL && strstr(t, "%gridid") != NULL);
            CHECK(strstr(t, "griddepcontrol.wait") != NULL);
        }
        tailor_compile_result_free(&plain);
        tailor_compile_result_free(&traced);
        tailor_compile_result_free(&planned);
    }
    tailor_plan_free(&plan);
}

/* Survivors of w4a16_matmul by template on a profile: plans built as tuning builds them. */
static void w4_survivors(tailor_ctx *ctx, const char *device, const char *shape_text,
                         tailor_dtype dtype, int *all, int *mma, int *wgmma, int *ws)
{
    *all = *mma = *wgmma = *ws = 0;
    tailor_shape shape;
    tailor_plan p;
    if (tailor_shape_parse(ctx, shape_text, &shape) != TAILOR_OK ||
        tailor_plan_build_survivors(ctx, tailor_device_profile_find(device), "w4a16_matmul",
                                    &shape, dtype, &p) != TAILOR_OK) {
        CHECKF(0, "%s %s: %s", device, shape_text, tailor_ctx_message(ctx));
        return;
    }
    *all = tailor_plan_survivors(&p);
    for (int i = 0; i < p.nentries; i++) {
        const char *t = p.entries[i].template_name;
        *mma += strcmp(t, "w4a16_mma") == 0;
        *wgmma += strcmp(t, "w4a16_wgmma") == 0;
        *ws += strcmp(t, "w4a16_wgmma_ws") == 0;
    }
    tailor_plan_free(&p);
}

/* Session 48's pruning on sm_90 (w4a16_mma.lua, w4a16_wgmma.lua): at decode widths w4a16_mma is
 * left to the GEMVs, and the plain warpgroup GEMM to its warp-specialized form where that one
 * plans. Neither may leave a shape without a kernel: odd n and k, every group size, zero
 * points, both dtypes; and each keeps the shapes the other does not plan (m = 24 between the
 * GEMVs and the warpgroup GEMMs, m = 64 below the warp-specialized tiles). */
static void test_w4a16_sm90_pruning(tailor_ctx *ctx)
{
    static const char *const weights[] = {"n=200,k=352,group=32,zp=1", "n=1000,k=1536,group=64",
                                          "n=6144,k=1536,group=128", "n=2560,k=10240,zp=1"};
    static const int decode_m[] = {1, 5, 9, 16};
    static const tailor_dtype dtypes[] = {TAILOR_DTYPE_BF16, TAILOR_DTYPE_F16};
    char shape[160];
    int all, mma, wgmma, ws;
    for (size_t d = 0; d < 2; d++)
        for (size_t w = 0; w < sizeof weights / sizeof weights[0]; w++)
            for (size_t m = 0; m < sizeof decode_m / sizeof decode_m[0]; m++) {
                snprintf(shape, sizeof shape, "m=%d,%s", decode_m[m], weights[w]);
                w4_survivors(ctx, "h100", shape, dtypes[d], &all, &mma, &wgmma, &ws);
                CHECKF(all > 0 && mma == 0, "h100 %s: %d survivors, %d of w4a16_mma", shape, all,
                       mma);
            }
    w4_survivors(ctx, "h200", "m=24,n=6144,k=1536,group=128", TAILOR_DTYPE_BF16, &all, &mma,
                 &wgmma, &ws);
    CHECKF(mma > 0, "h200 m=24: %d survivors of w4a16_mma", mma);
    w4_survivors(ctx, "t4", "m=1,n=6144,k=1536,group=128", TAILOR_DTYPE_F16, &all, &mma, &wgmma,
                 &ws);
    CHECKF(mma > 0, "t4 m=1: %d survivors of w4a16_mma (the pruning is sm_90's)", mma);
    static const char *const prefill[] = {"m=300,n=1000,k=1536,group=64,zp=1",
                                          "m=2048,n=6144,k=1536,group=128",
                                          "m=512,n=1536,k=12288,group=128"};
    for (size_t d = 0; d < 2; d++)
        for (size_t i = 0; i < sizeof prefill / sizeof prefill[0]; i++) {
            w4_survivors(ctx, "h200", prefill[i], dtypes[d], &all, &mma, &wgmma, &ws);
            CHECKF(ws > 0 && wgmma == 0, "h200 %s: %d w4a16_wgmma_ws, %d w4a16_wgmma survivors",
                   prefill[i], ws, wgmma);
        }
    w4_survivors(ctx, "h200", "m=64,n=2048,k=1536,group=128", TAILOR_DTYPE_BF16, &all, &mma,
                 &wgmma, &ws);
    CHECKF(wgmma > 0 && ws == 0, "h200 m=64: %d w4a16_wgmma, %d w4a16_wgmma_ws survivors", wgmma,
           ws);
    /* both rules prune only: a winner cached before them (or tuned at m = 24 / 64) still
     * launches at the shapes they now leave to another template */
    const char *mma_cfg = "{\"BK\":64,\"BM\":16,\"BN\":64,\"SPLITK\":1,\"STAGES\":4,\"WM\":1,"
                          "\"WN\":2}";
    expect_refused(ctx, "w4a16_mma", mma_cfg, "m=1,n=6144,k=1536,group=128", 0,
                   "m=1 on sm_90: left to the GEMVs");
    expect_valid(ctx, "w4a16_mma", mma_cfg, "m=1,n=6144,k=1536,group=128", 1, 1);
    const char *wg_cfg = "{\"BK\":64,\"BM\":64,\"INFLIGHT\":0,\"STAGES\":3,\"WG\":1}";
    expect_refused(ctx, "w4a16_wgmma", wg_cfg, "m=512,n=2048,k=1536,group=128", 0,
                   "m=512: left to w4a16_wgmma_ws");
    expect_valid(ctx, "w4a16_wgmma", wg_cfg, "m=512,n=2048,k=1536,group=128", 1, 1);
}

/* An experimental w4a16_matmul space of sm_80 features, planned with the experimental spaces
 * admitted: the H200 gets survivors of it at `shape_text`, the T4 none. */
static void expect_sm80_only(tailor_ctx *ctx, const char *space, const char *shape_text)
{
    setenv("TAILOR_EXPERIMENTAL", "1", 1);
    static const char *const devices[] = {"h200", "t4"};
    for (int d = 0; d < 2; d++) {
        tailor_shape shape;
        tailor_plan p;
        if (tailor_shape_parse(ctx, shape_text, &shape) != TAILOR_OK ||
            tailor_plan_build_survivors(ctx, tailor_device_profile_find(devices[d]),
                                        "w4a16_matmul", &shape, TAILOR_DTYPE_F16,
                                        &p) != TAILOR_OK) {
            CHECKF(0, "%s: %s", devices[d], tailor_ctx_message(ctx));
            continue;
        }
        int n = 0;
        for (int i = 0; i < p.nentries; i++)
            n += strcmp(p.entries[i].template_name, space) == 0;
        CHECKF(d == 0 ? n > 0 : n == 0, "%s at %s on the %s: %d survivors", space, shape_text,
               devices[d], n);
        tailor_plan_free(&p);
    }
    unsetenv("TAILOR_EXPERIMENTAL");
}

/* The ring of w4a16_gemv_t (RING, the experimental space w4a16_gemv_t_ring): its own space has
 * no register path, and refuses what the kernel's ring cannot hold (TRIM, quads of several
 * groups); its dynamic shared memory is each warp's ring after the activations, exactly the
 * kernel's layout (w4t::RING_BYTES); below sm_80 (no cp.async) it plans nothing. */
static void test_w4a16_ring(tailor_ctx *ctx)
{
    const char *big = "m=1,n=21504,k=5376,group=128";
    const char *ring3 = "{\"ASMEM\":0,\"CSPLIT\":0,\"MT\":1,\"RING\":3,\"RT\":1,\"SPLITK\":1,"
                        "\"TRIM\":0,\"UNROLL\":2,\"WK\":1,\"WR\":4}";
    tailor_launch l;
    if (evaluate(ctx, "w4a16_gemv_t_ring", ring3, big, 0, &l)) {
        /* per warp 3 slots x (2 quads x 2 rows x 32 lanes x 16 B + 2 x 16 scales x 2 B) */
        CHECKF(l.valid && l.smem_dynamic == 4 * 3 * (2 * 2 * 32 * 16 + 2 * 16 * 2),
               "ring RING=3 at %s: valid=%d (%s), %lld B dynamic", big, l.valid,
               l.invalid_reason, l.smem_dynamic);
        CHECKF(l.nfeatures > 0, "ring: %d features (cp.async wanted)", l.nfeatures);
        int async = 0;
        for (int i = 0; i < l.nfeatures; i++)
            async |= strcmp(l.features[i], "cp.async") == 0;
        CHECKF(async, "ring RING=3: cp.async not among its required features");
    }
    if (evaluate(ctx, "w4a16_gemv_t_ring", ring3, "m=1,n=21504,k=5376,group=128,zp=1", 0, &l))
        CHECKF(l.valid && l.smem_dynamic == 4 * 3 * (2 * 2 * 32 * 16 + 2 * 16 * 2 + 2 * 16),
               "ring RING=3 with zero points: valid=%d, %lld B dynamic", l.valid, l.smem_dynamic);
    const char *asm4 = "{\"ASMEM\":1,\"CSPLIT\":0,\"MT\":1,\"RING\":4,\"RT\":1,\"SPLITK\":1,"
                       "\"TRIM\":0,\"UNROLL\":3,\"WK\":1,\"WR\":4}";
    if (evaluate(ctx, "w4a16_gemv_t_ring", asm4, "m=1,n=262144,k=1536,group=128", 0, &l))
        /* the activations (12 quads of one row, 16 elements of padding) come first */
        CHECKF(l.valid && l.smem_dynamic == 2 * (128 * 12 + 16) + 4 * 4 * (3 * 2 * 32 * 16 + 3 * 16 * 2),
               "ring ASMEM=1 RING=4: valid=%d (%s), %lld B dynamic", l.valid, l.invalid_reason,
               l.smem_dynamic);
    const char *ring0 = "{\"ASMEM\":0,\"CSPLIT\":0,\"MT\":1,\"RING\":0,\"RT\":1,\"SPLITK\":1,"
                        "\"TRIM\":0,\"UNROLL\":2,\"WK\":1,\"WR\":4}";
    expect_refused(ctx, "w4a16_gemv_t_ring", ring0, big, 0, "RING=0: the register path");
    const char *trim = "{\"ASMEM\":0,\"CSPLIT\":0,\"MT\":1,\"RING\":3,\"RT\":1,\"SPLITK\":1,"
                       "\"TRIM\":1,\"UNROLL\":2,\"WK\":4,\"WR\":1}";
    expect_refused(ctx, "w4a16_gemv_t_ring", trim, big, 0, "trimming is the register path's");
    expect_refused(ctx, "w4a16_gemv_t_ring", ring3, "m=1,n=6144,k=1536,group=64", 1,
                   "one scale a quad");
    /* planned: the H200 gets ring survivors, the T4 none */
    expect_sm80_only(ctx, "w4a16_gemv_t_ring", "m=1,n=6144,k=1536,group=128");
}

/* FOLD of w4a16_gemv_t (the experimental space w4a16_gemv_t_fold): it needs the staged
 * activations and whole quads per group, and its dynamic shared memory is sA then the quads'
 * sums, float[qps][8 MT] (the kernel's sQ). */
static void test_w4a16_fold(tailor_ctx *ctx)
{
    const char *fold = "{\"ASMEM\":1,\"CSPLIT\":0,\"FOLD\":1,\"MT\":1,\"RT\":1,\"SPLITK\":1,"
                       "\"TRIM\":0,\"UNROLL\":3,\"WK\":1,\"WR\":4}";
    tailor_launch l;
    if (evaluate(ctx, "w4a16_gemv_t_fold", fold, "m=1,n=262144,k=1536,group=128", 0, &l))
        CHECKF(l.valid && l.smem_dynamic == 2 * (128 * 12 + 16) + 4 * 12 * 8,
               "fold at the int4 head: valid=%d (%s), %lld B dynamic", l.valid, l.invalid_reason,
               l.smem_dynamic);
    const char *mt2 = "{\"ASMEM\":1,\"CSPLIT\":0,\"FOLD\":1,\"MT\":2,\"RT\":2,\"SPLITK\":2,"
                      "\"TRIM\":0,\"UNROLL\":2,\"WK\":2,\"WR\":2}";
    if (evaluate(ctx, "w4a16_gemv_t_fold", mt2, "m=16,n=6144,k=1536,group=128,zp=1", 0, &l))
        /* 12 quads split in two: 6 a block, 16 rows staged, 16 sums a quad */
        CHECKF(l.valid && l.smem_dynamic == 2 * 16 * (128 * 6 + 16) + 4 * 6 * 16,
               "fold m=16 SPLITK=2: valid=%d (%s), %lld B dynamic", l.valid, l.invalid_reason,
               l.smem_dynamic);
    const char *noasm = "{\"ASMEM\":0,\"CSPLIT\":0,\"FOLD\":1,\"MT\":1,\"RT\":1,\"SPLITK\":1,"
                        "\"TRIM\":0,\"UNROLL\":3,\"WK\":1,\"WR\":4}";
    expect_refused(ctx, "w4a16_gemv_t_fold", noasm, "m=1,n=262144,k=1536,group=128", 1,
                   "quads' sums come from the staged activations");
    expect_refused(ctx, "w4a16_gemv_t_fold", fold, "m=1,n=6144,k=1536,group=64", 1,
                   "the bias comes off a quad's sum");
}

/* The gated GEMV with FOLD (w4a16_glu_t_fold): the same shared-memory formula as the plain
 * one (sA of one row, then the quads' sums), and the same rule against groups under 128. */
static void test_w4a16_glu_fold(tailor_ctx *ctx)
{
    const char *fold = "{\"ASMEM\":1,\"FOLD\":1,\"MT\":1,\"RT\":2,\"SPLITK\":1,"
                       "\"TRIM\":0,\"UNROLL\":2,\"WK\":1,\"WR\":4}";
    tailor_launch l;
    if (evaluate(ctx, "w4a16_glu_t_fold", fold, "m=1,n=12288,k=1536,group=128", 0, &l))
        CHECKF(l.valid && l.smem_dynamic == 2 * (128 * 12 + 16) + 4 * 12 * 8,
               "gated fold at n=12288: valid=%d (%s), %lld B dynamic", l.valid, l.invalid_reason,
               l.smem_dynamic);
    expect_refused(ctx, "w4a16_glu_t_fold", fold, "m=1,n=12288,k=1536,group=32", 1,
                   "the bias comes off a quad's sum");
}

/* L2PF of w4a16_gemv_t (the experimental space w4a16_gemv_t_l2pf): the L2::256B prefetch size
 * is sm_80's, so the H200 plans survivors and the T4 none, each refusal saying why. */
static void test_w4a16_l2pf(tailor_ctx *ctx)
{
    const char *l2pf = "{\"ASMEM\":0,\"CSPLIT\":0,\"L2PF\":1,\"MT\":1,\"RT\":1,\"SPLITK\":1,"
                       "\"TRIM\":0,\"UNROLL\":3,\"WK\":1,\"WR\":4}";
    expect_valid(ctx, "w4a16_gemv_t_l2pf", l2pf, "m=1,n=21504,k=5376,group=128", 0, 1);
    expect_sm80_only(ctx, "w4a16_gemv_t_l2pf", "m=1,n=21504,k=5376,group=128");
}

/* A w4a16_gemv_t configuration of one row tile and one split (RT 1, SPLITK 1, CSPLIT 0) with
 * `extra` ("\"KEY\":V,...", or "") added: the JSON the variant spaces' checks below take. */
static const char *w4t_cfg(char *buf, size_t n, const char *extra, int asmem, int mt, int trim,
                           int unroll, int wk, int wr)
{
    snprintf(buf, n,
             "{%s%s\"ASMEM\":%d,\"CSPLIT\":0,\"MT\":%d,\"RT\":1,\"SPLITK\":1,\"TRIM\":%d,"
             "\"UNROLL\":%d,\"WK\":%d,\"WR\":%d}",
             extra, *extra ? "," : "", asmem, mt, trim, unroll, wk, wr);
    return buf;
}

/* MAGREG of w4a16_gemv_t: set by spacelib in the magreg spaces (opts.magreg) wherever the pairs
 * are unscaled (group a multiple of 128), with MINB 1 but at MT = 2 on sm_90; not in the spaces
 * built without opts.magreg (L2PF); a space that lists it (the FOLD variant) sets it itself, and
 * MAGREG=1 is refused where groups under a quad prescale through w4a16_common's pairs. */
static void expect_define(tailor_ctx *ctx, const char *space, const char *cfg_json,
                          const char *shape_text, const char *name, const char *want)
{
    tailor_launch l;
    if (!evaluate(ctx, space, cfg_json, shape_text, 0, &l))
        return;
    const char *got = NULL;
    for (int i = 0; i < l.ndefines; i++)
        if (strcmp(l.defines[i].name, name) == 0)
            got = l.defines[i].value;
    CHECKF(want ? got && strcmp(got, want) == 0 : !got, "%s %s at %s: %s=%s, want %s", space,
           cfg_json, shape_text, name, got ? got : "(not defined)", want ? want : "(not defined)");
}

static void test_w4a16_magreg(tailor_ctx *ctx)
{
    char buf[256];
    w4t_cfg(buf, sizeof buf, "", 1, 1, 0, 3, 1, 4);
    expect_define(ctx, "w4a16_gemv_t_magreg", buf, "m=1,n=262144,k=1536,group=128", "MAGREG", "1");
    expect_define(ctx, "w4a16_gemv_t_magreg", buf, "m=1,n=262144,k=1536,group=128", "MINB", "1");
    expect_define(ctx, "w4a16_gemv_t_magreg", buf, "m=1,n=6144,k=1536,group=64", "MAGREG", NULL);
    expect_define(ctx, "w4a16_gemv_t_magreg", buf, "m=1,n=6144,k=1536,group=64", "MINB", NULL);
    expect_define(ctx, "w4a16_gemv_t", buf, "m=1,n=262144,k=1536,group=128", "MAGREG", NULL);
    w4t_cfg(buf, sizeof buf, "", 0, 2, 0, 2, 1, 4); /* MT 2: no spill without the bounds */
    expect_define(ctx, "w4a16_gemv_t_magreg", buf, "m=16,n=6144,k=1536,group=128", "MAGREG", "1");
    expect_define(ctx, "w4a16_gemv_t_magreg", buf, "m=16,n=6144,k=1536,group=128", "MINB", NULL);
    w4t_cfg(buf, sizeof buf, "\"L2PF\":1", 1, 1, 0, 3, 1, 4);
    expect_define(ctx, "w4a16_gemv_t_l2pf", buf, "m=1,n=262144,k=1536,group=128", "MAGREG", NULL);
    const char *glu = "{\"ASMEM\":1,\"MT\":1,\"RT\":2,\"SPLITK\":1,\"TRIM\":0,\"UNROLL\":2,"
                      "\"WK\":1,\"WR\":4}";
    expect_define(ctx, "w4a16_glu_t_magreg", glu, "m=1,n=12288,k=1536,group=128", "MAGREG", "1");
    expect_define(ctx, "w4a16_glu_t_magreg", glu, "m=1,n=12288,k=1536,group=32", "MAGREG", NULL);
    expect_define(ctx, "w4a16_glu_t", glu, "m=1,n=12288,k=1536,group=128", "MAGREG", NULL);
    /* the FOLD variant lists MAGREG {0, 1}: its own value, and MINB with it */
    w4t_cfg(buf, sizeof buf, "\"FOLD\":1,\"MAGREG\":0", 1, 1, 0, 3, 1, 4);
    expect_define(ctx, "w4a16_gemv_t_fold", buf, "m=1,n=262144,k=1536,group=128", "MINB", NULL);
    w4t_cfg(buf, sizeof buf, "\"FOLD\":1,\"MAGREG\":1", 1, 1, 0, 3, 1, 4);
    expect_define(ctx, "w4a16_gemv_t_fold", buf, "m=1,n=262144,k=1536,group=128", "MINB", "1");
    expect_refused(ctx, "w4a16_gemv_t_fold",
                   w4t_cfg(buf, sizeof buf, "\"FOLD\":0,\"MAGREG\":1", 1, 1, 0, 3, 1, 4),
                   "m=1,n=6144,k=1536,group=64", 1, "the prescaled pairs");
    expect_valid(ctx, "w4a16_gemv_t_fold",
                 w4t_cfg(buf, sizeof buf, "\"FOLD\":1,\"MAGREG\":1", 1, 1, 0, 3, 1, 4),
                 "m=1,n=262144,k=1536,group=128", 0, 1);
}

/* CLAMP of w4a16_gemv_t (the experimental spaces w4a16_{gemv,glu}_t_clamp): valid with MAGREG
 * at groups of 128 and at odd shapes, and refused beside FOLD, whose empty slots need scale 0. */
static void test_w4a16_clamp(tailor_ctx *ctx)
{
    const char *clamp = "{\"ASMEM\":0,\"CLAMP\":1,\"CSPLIT\":0,\"MT\":1,\"RT\":1,\"SPLITK\":1,"
                        "\"TRIM\":0,\"UNROLL\":3,\"WK\":1,\"WR\":4}";
    expect_valid(ctx, "w4a16_gemv_t_clamp", clamp, "m=1,n=262144,k=1536,group=128", 0, 1);
    expect_valid(ctx, "w4a16_gemv_t_clamp", clamp, "m=3,n=200,k=1408,group=64,zp=1", 0, 1);
    expect_define(ctx, "w4a16_gemv_t_clamp", clamp, "m=1,n=262144,k=1536,group=128", "MAGREG", "1");
    const char *fold = "{\"ASMEM\":1,\"CLAMP\":1,\"CSPLIT\":0,\"FOLD\":1,\"MT\":1,\"RT\":1,"
                       "\"SPLITK\":1,\"TRIM\":0,\"UNROLL\":2,\"WK\":1,\"WR\":4}";
    expect_refused(ctx, "w4a16_gemv_t_clamp", fold, "m=1,n=6144,k=1536,group=128", 0,
                   "FOLD needs a slot past the warp's quads to have scale 0");
    const char *glu = "{\"ASMEM\":1,\"CLAMP\":1,\"MT\":1,\"RT\":2,\"SPLITK\":1,\"TRIM\":0,"
                      "\"UNROLL\":2,\"WK\":1,\"WR\":4}";
    expect_valid(ctx, "w4a16_glu_t_clamp", glu, "m=1,n=12288,k=1536,group=128", 0, 1);
}

/* The timing method is part of every space hash: the W4A16 ops are timed with the spacer by
 * default (space.h), the others as before, TAILOR_TIMING_SPACER=0/1 moves every op to one
 * method and a list of op names adds those, so that their cached winners are told apart. */
static void space_hash_of(tailor_ctx *ctx, const char *name, char hex[65])
{
    tailor_space *s = NULL;
    hex[0] = 0;
    CHECK_OK(ctx, tailor_space_load(ctx, name, &s));
    if (s)
        CHECK_OK(ctx, tailor_space_hash(ctx, s, hex));
    tailor_space_destroy(s);
}

static void test_timing_method(tailor_ctx *ctx)
{
    char m_def[65], m_off[65], m_on[65], w_def[65], w_off[65], w_on[65];
    unsetenv("TAILOR_TIMING_SPACER");
    CHECK(tailor_timing_spacer("w4a16_matmul") && tailor_timing_spacer("w4a16_glu"));
    CHECK(!tailor_timing_spacer("matmul") && !tailor_timing_spacer("attention_decode"));
    CHECK(strcmp(tailor_timing_method("matmul"), TAILOR_TIMING_METHOD) == 0);
    CHECK(strcmp(tailor_timing_method("w4a16_pro"), TAILOR_TIMING_METHOD_SPACER) == 0);
    space_hash_of(ctx, "matmul_gemv", m_def);
    space_hash_of(ctx, "w4a16_gemv", w_def);
    setenv("TAILOR_TIMING_SPACER", "0", 1);
    CHECK(!tailor_timing_spacer("w4a16_matmul"));
    space_hash_of(ctx, "matmul_gemv", m_off);
    space_hash_of(ctx, "w4a16_gemv", w_off);
    /* tailor_list_has, which reads the list: whole entries only */
    CHECK(tailor_list_has("a,bc", "bc") && tailor_list_has("a,bc", "a"));
    CHECK(!tailor_list_has("a,bc", "b") && !tailor_list_has("a,bc", "a,b") && !tailor_list_has("", "a"));
    /* a list: the ops it names besides the W4A16 ones; no prefix or substring matches */
    setenv("TAILOR_TIMING_SPACER", "rmsnorm,attention_decode", 1);
    CHECK(tailor_timing_spacer("attention_decode") && tailor_timing_spacer("rmsnorm"));
    CHECK(tailor_timing_spacer("w4a16_matmul") && !tailor_timing_spacer("matmul"));
    CHECK(!tailor_timing_spacer("attention_prefill"));
    CHECK_OK(ctx, tailor_timing_spacer_check(ctx));
    setenv("TAILOR_TIMING_SPACER", "attention_decode_x,norm", 1);
    CHECK(!tailor_timing_spacer("attention_decode") && !tailor_timing_spacer("rmsnorm"));
    /* a name that is no op, or an empty item, is refused with the item named, and no space
     * hash (so no cached winner) comes out under it */
    CHECK(tailor_timing_spacer_check(ctx) == TAILOR_ERR_MISUSE);
    CHECKF(strstr(tailor_ctx_message(ctx), "TAILOR_TIMING_SPACER='attention_decode_x,norm': "
                                           "'attention_decode_x' is no op") != NULL,
           "%s", tailor_ctx_message(ctx));
    tailor_space *sp = NULL;
    char bad[65] = "";
    CHECK_OK(ctx, tailor_space_load(ctx, "rmsnorm", &sp));
    CHECK(sp && tailor_space_hash(ctx, sp, bad) == TAILOR_ERR_MISUSE && bad[0] == 0);
    tailor_space_destroy(sp);
    setenv("TAILOR_TIMING_SPACER", "rmsnorm,", 1);
    CHECK(tailor_timing_spacer_check(ctx) == TAILOR_ERR_MISUSE);
    CHECK(strstr(tailor_ctx_message(ctx), "'' is no op") != NULL);
    setenv("TAILOR_TIMING_SPACER", "", 1); /* set and empty: as unset */
    CHECK_OK(ctx, tailor_timing_spacer_check(ctx));
    CHECK(!tailor_timing_spacer("rmsnorm") && tailor_timing_spacer("w4a16_matmul"));
    setenv("TAILOR_TIMING_SPACER", "1", 1);
    CHECK(tailor_timing_spacer("matmul"));
    space_hash_of(ctx, "matmul_gemv", m_on);
    space_hash_of(ctx, "w4a16_gemv", w_on);
    unsetenv("TAILOR_TIMING_SPACER");
    CHECK(m_def[0] && strcmp(m_def, m_off) == 0 && strcmp(m_def, m_on) != 0);
    CHECK(w_def[0] && strcmp(w_def, w_on) == 0 && strcmp(w_def, w_off) != 0);
}

int main(void)
{
    tailor_ctx *ctx = test_ctx();
    snprintf(dir, sizeof dir, "/tmp/tailor-test-space-%d", (int)getpid());
    mkdir(dir, 0755);
    /* an entry that is not a directory (a typo) fails naming it, not silently skipped */
    setenv("TAILOR_TEMPLATE_PATH", "/no/such/template/dir", 1);
    tailor_space *none = NULL;
    CHECK(tailor_space_load(ctx, "rmsnorm", &none) == TAILOR_ERR_NOT_FOUND && !none);
    CHECKF(strstr(tailor_ctx_message(ctx), "TAILOR_TEMPLATE_PATH: '/no/such/template/dir' is "
                  "not a directory") != NULL, "%s", tailor_ctx_message(ctx));
    setenv("TAILOR_TEMPLATE_PATH", dir, 1);
    test_enumerate(ctx);
    test_out_of_memory(ctx);
    test_sandbox(ctx);
    test_ranges(ctx);
    /* the broken files must not disturb the plans below */
    static const char *const broken[] = {"syntax", "uses_io", "uses_os", "uses_require", "global",
                                         "loop", "nogrid", "badarg", "thrower", "dupdefine",
                                         "reqstring", "reqnumber", "reqlong", "deftable",
                                         "deflist", "defspace", "defdigit", "emptyparam",
                                         "emptyfn", "badparam", "srcup", "srcdir"};
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s.lua", dir, broken[i]);
        unlink(path);
    }
    test_arg_names(ctx);
    test_launch_order(ctx);
    test_variant_and_budget(ctx);
    test_experimental(ctx);
    test_find_for_op_follows_text(ctx);
    test_plan_errors(ctx);
    test_launch_purpose(ctx);
    test_trim(ctx);
    test_csplit(ctx);
    test_prologue_launch(ctx);
    test_stride_and_prep_launch(ctx);
    test_decode_wg_launch(ctx);
    test_decode_cluster(ctx);
    test_decode_flat(ctx);
    test_space_lib(ctx);
    test_split_neighbours(ctx);
    test_trace_compile(ctx);
    test_timing_method(ctx);
    test_w4a16_sm90_pruning(ctx);
    test_w4a16_ring(ctx);
    test_w4a16_fold(ctx);
    test_w4a16_glu_fold(ctx);
    test_w4a16_l2pf(ctx);
    test_w4a16_magreg(ctx);
    test_w4a16_clamp(ctx);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    tailor_ctx_destroy(ctx);
    return test_finish("test_space");
}
