/* commbench's NCCL tuner plugin: applies the rules `commbench nccl-tuner` writes, and nothing else.
 *
 * Same CSV as NCCL's example tuner plugin (NCCL_TUNER_CONFIG_FILE, default ./nccl_tuner.conf):
 *   collective,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff]]
 * but it leaves NCCL alone wherever no rule speaks:
 *   - no matching rule: nChannels and the cost table are not touched (NCCL chooses as without a plugin);
 *   - channels -1 or 0: nChannels is not touched (NCCL keeps its own count: src/enqueue.cc
 *     `info->nMaxChannels = nMaxChannels == 0 ? info->nMaxChannels : nMaxChannels`);
 *   - the first matching rule decides; if NCCL does not consider its algorithm/protocol for this call (a
 *     negative cost: NCCL_ALGO_PROTO_IGNORE, -1.0, or -1024 where that is relegated; NCCL itself takes only
 *     costs >= 0), or has relegated it (ring for fp8 beyond 8 ranks: src/enqueue.cc updateCollCostTable
 *     multiplies ring's entries by 1024, v2.24.3-1 to v2.30.7-1, "a partition between lossy and non-lossy
 *     algos": they stay positive, so a ring rule, measured on another type of the same bytes, would force
 *     the lossy path), NCCL's own choice stands (no later rule is tried) and that is logged once per rule;
 *   - a line with an unknown name, a bad number, a wrong field count, a channel count above NCCL's
 *     MAXCHANNELS (64; NCCL keeps it in an 8-bit field) or a CollNet rule with an explicit channel count
 *     (NCCL uses a CollNet count unbounded by the channels it set up: src/enqueue.cc) is dropped and
 *     logged (it is never read as allreduce/ring/simple);
 *   - `# requires: nccl X.Y.Z` / `# requires: gpu NAME` lines (commbench nccl-tuner writes them): where the
 *     NCCL that loaded the plugin, or the GPU, is another, no rule is used; where it cannot be told here
 *     (no ncclGetVersion beside NCCL's logger, no CUDA context), the rules are used and the log says so;
 *     `# requires: env NAME=VALUE` lines: where getenv(NAME) is unset or another value, no rule is used (NCCL's
 *     default was measured under that setting);
 *     two different values of one requirement (configs joined) use no rule either, with one WARN naming both;
 *   - it never fails NCCL: init and getCollInfo return ncclSuccess always (NCCL aborts the communicator
 *     or the call on an error), without rules on any trouble;
 *   - logging (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING): per communicator one line (the rules loaded, or
 *     why none), each rule the first time it applies, each rule the first time NCCL stops it; problems of
 *     the file itself (cannot open it, dropped lines, another NCCL or GPU) as WARN, by the first
 *     communicator that reads it only.
 *
 * Interface declared here from NCCL's documented layout (src/include/plugin/tuner/tuner_v4.h, _v5.h, _v6.h,
 * nccl_common.h); nothing copied. Exported: ncclTunerPlugin_v6 (NCCL 2.30+), _v5 (2.28+), _v4 (2.24-2.27).
 * NCCL 2.19-2.21 look for v1/v2, whose interface has no cost table (nothing tells which algorithm/protocol
 * NCCL disabled), and 2.22-2.23 for v3: they find no symbol here and tune alone.
 * Build: cc -shared -fPIC -O2 -pthread -o libnccl-tuner-commbench.so commbench_tuner.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- NCCL's tuner interface (layout from NCCL's headers, declared here) ------------------------- */
typedef int ncclResult_t;
enum { CB_SUCCESS = 0 }; /* ncclSuccess: the only result this plugin returns */
typedef int ncclFunc_t; /* ncclFuncBroadcast 0, Reduce 1, AllGather 2, ReduceScatter 3, AllReduce 4 */
typedef int ncclDebugLogLevel;
enum { CB_LOG_WARN = 2, CB_LOG_INFO = 3, CB_TUNING = 0x40 }; /* NCCL_LOG_WARN, NCCL_LOG_INFO, NCCL_TUNING */
typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                                  const char* fmt, ...);
typedef struct {
  int nNvlDomains;
  int minRanksPerNvlDomain;
  int maxRanksPerNvlDomain;
} cbNvlDomainInfo_t;
typedef void cbConstants_t; /* ncclTunerConstants_v5_t: left as NCCL set it */

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                       cbNvlDomainInfo_t* nvlDomainInfo, cbConstants_t* constants);
  ncclResult_t (*getCollInfo)(void* ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int regBuff, int* nChannels);
  ncclResult_t (*finalize)(void* ctx);
} cbTuner_v5_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                       cbNvlDomainInfo_t* nvlDomainInfo, cbConstants_t* constants);
  ncclResult_t (*getCollInfo)(void* ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int regBuff, int* nChannels);
  ncclResult_t (*finalize)(void* ctx);
  ncclResult_t (*getChunkSize)(void* ctx, ncclFunc_t collType, size_t nBytes, int algo, int proto, int nChannels,
                               size_t* chunkSize);
} cbTuner_v6_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** ctx);
  ncclResult_t (*getCollInfo)(void* ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int regBuff, int* nChannels);
  ncclResult_t (*destroy)(void* ctx);
} cbTuner_v4_t;

#define CB_MAX_CHANNELS 64 /* MAXCHANNELS (src/include/device.h; 32 before 2.28: NCCL bounds that itself) */
#define CB_ALGO_COLLNET_DIRECT 2
#define CB_ALGO_COLLNET_CHAIN 3
/* --- end of the interface ------------------------------------------------------------------------ */

#define PLUGIN_NAME "commbench"
#define PREFIX "TUNER/commbench: "

static const char* const COLLECTIVES[] = {"broadcast", "reduce", "allgather", "reducescatter", "allreduce"};
/* NCCL_ALGO_* and NCCL_PROTO_* indices (nccl_tuner.h) */
enum { CB_ALGO_RING = 1 }; /* NCCL_ALGO_RING: ALGORITHMS below are in NCCL's order (nccl_common.h) */
static const char* const ALGORITHMS[] = {"tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree",
                                         "pat"};
static const char* const PROTOCOLS[] = {"ll", "ll128", "simple"};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

typedef struct {
  int collType, algorithm, protocol, nChannels, nNodes, nRanks, numPipeOps, regBuff;
  unsigned long long minBytes, maxBytes;
  int lineNumber;
  int ignoreLogged, appliedLogged;
} Rule;

typedef struct {
  Rule* rules;
  int numRules;
  size_t nRanks, nNodes;
  ncclDebugLogger_t log;
  int reportFile; /* the first communicator that reads this file: WARN about the file itself */
} Context;

#define LOG(ctx, level, ...) \
  do { if ((ctx)->log) (ctx)->log(level, CB_TUNING, __FILE__, __LINE__, __VA_ARGS__); } while (0)
/* A problem of the file itself: WARN, by the first communicator that reads the file only (every
 * communicator of every rank reads it: one line each would flood a job's log). */
#define WARN_FILE(ctx, ...) \
  do { if ((ctx)->reportFile) LOG(ctx, CB_LOG_WARN, __VA_ARGS__); } while (0)

/* Whether this process has not yet reported on `path` (NCCL_TUNER_CONFIG_FILE is one per process). */
static int firstReader(const char* path) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static char reported[4096] = "";
  int first = 0;
  pthread_mutex_lock(&lock);
  if (strncmp(reported, path, sizeof(reported)) != 0) {
    snprintf(reported, sizeof(reported), "%s", path);
    first = 1;
  }
  pthread_mutex_unlock(&lock);
  return first;
}

static int lookup(const char* name, const char* const* names, int count) {
  for (int i = 0; i < count; i++)
    if (strcmp(name, names[i]) == 0) return i;
  return -1;
}

static char* trim(char* s) {
  while (*s == ' ' || *s == '\t') s++;
  char* end = s + strlen(s);
  while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r' || end[-1] == '\n')) *--end = '\0';
  return s;
}

/* A whole field as a decimal integer (-1 allowed where `allowAny`); 0 on success. */
static int parseInt(const char* s, int allowAny, long long* out) {
  if (*s == '\0') return -1;
  char* end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *end != '\0' || v < (allowAny ? -1 : 0) || v > INT32_MAX) return -1;
  *out = v;
  return 0;
}

static int parseBytes(const char* s, unsigned long long* out) {
  if (*s < '0' || *s > '9') return -1;
  char* end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end != '\0') return -1;
  *out = v;
  return 0;
}

/* One non-comment line -> a rule; returns a reason when the line is dropped. */
static const char* parseRule(char* line, Rule* rule) {
  char* fields[11];
  int n = 0;
  char* cursor = line;
  for (;;) {
    char* comma = strchr(cursor, ',');
    if (n == 11) return "more than 10 fields";
    fields[n++] = cursor;
    if (!comma) break;
    *comma = '\0';
    cursor = comma + 1;
  }
  if (n < 8 || n > 10) return "needs 8 to 10 fields";
  for (int i = 0; i < n; i++) fields[i] = trim(fields[i]);
  long long v[7] = {-1, -1, -1, -1, -1, -1, -1};
  if ((rule->collType = lookup(fields[0], COLLECTIVES, COUNT(COLLECTIVES))) < 0) return "unknown collective";
  /* the fields in line order: the reason names the first bad one */
  if (parseBytes(fields[1], &rule->minBytes)) return "bad min_bytes";
  if (strcmp(fields[2], "-1") == 0) {
    rule->maxBytes = ~0ULL; /* no upper bound: what the example plugin's strtoull makes of -1 */
  } else if (parseBytes(fields[2], &rule->maxBytes)) {
    return "bad max_bytes";
  }
  if (rule->minBytes > rule->maxBytes) return "min_bytes > max_bytes";
  if ((rule->algorithm = lookup(fields[3], ALGORITHMS, COUNT(ALGORITHMS))) < 0) return "unknown algorithm";
  if ((rule->protocol = lookup(fields[4], PROTOCOLS, COUNT(PROTOCOLS))) < 0) return "unknown protocol";
  static const char* const INT_FIELD_REASONS[] = {"bad channels", "bad nNodes", "bad nRanks", "bad numPipeOps",
                                                  "bad regBuff"};
  for (int i = 5; i < n; i++)
    if (parseInt(fields[i], 1, &v[i - 5])) return INT_FIELD_REASONS[i - 5];
  rule->nChannels = (int)v[0];
  if (rule->nChannels > CB_MAX_CHANNELS) return "channels above 64 (NCCL's MAXCHANNELS)";
  if (rule->nChannels > 0 && (rule->algorithm == CB_ALGO_COLLNET_DIRECT || rule->algorithm == CB_ALGO_COLLNET_CHAIN))
    return "CollNet with an explicit channel count (NCCL does not bound it by its channels: use 0)";
  rule->nNodes = (int)v[1];
  rule->nRanks = (int)v[2];
  rule->numPipeOps = (int)v[3];
  rule->regBuff = (int)v[4];
  rule->ignoreLogged = rule->appliedLogged = 0;
  return NULL;
}

/* "X.Y.Z" of an NCCL version code (ncclGetVersion: X*10000+Y*100+Z since 2.9, X*1000+Y*100+Z before). */
static void versionText(int code, char* out, size_t size) {
  if (code >= 10000) snprintf(out, size, "%d.%d.%d", code / 10000, code / 100 % 100, code % 100);
  else snprintf(out, size, "%d.%d.%d", code / 1000, code / 100 % 10, code % 100);
}

/* The version of the NCCL that called init: ncclGetVersion of the library holding NCCL's logger (the
 * process may hold another NCCL too); "" when it cannot be told. */
static void runningNccl(void* loggerAddress, char* out, size_t size) {
  out[0] = '\0';
  Dl_info info;
  if (!loggerAddress || !dladdr(loggerAddress, &info) || !info.dli_fname || !info.dli_fname[0]) return;
  void* library = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (!library) return;
  int (*getVersion)(int*) = (int (*)(int*))dlsym(library, "ncclGetVersion");
  int code = 0;
  if (getVersion && getVersion(&code) == 0 && code > 0) versionText(code, out, size);
  dlclose(library);
}

/* The name of the GPU of the current CUDA context (NCCL's, during init); "" when it cannot be told. */
static void runningGpu(char* out, int size) {
  out[0] = '\0';
  void* cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!cuda) return;
  int (*ctxGetDevice)(int*) = (int (*)(int*))dlsym(cuda, "cuCtxGetDevice");
  int (*deviceGetName)(char*, int, int) = (int (*)(char*, int, int))dlsym(cuda, "cuDeviceGetName");
  int device = 0;
  if (!ctxGetDevice || !deviceGetName || ctxGetDevice(&device) != 0 || deviceGetName(out, size, device) != 0)
    out[0] = '\0';
  out[size - 1] = '\0';
  dlclose(cuda);
}

#define CB_MAX_ENV 64 /* `# requires: env` lines a file may hold (more: the file is refused) */
typedef struct {
  char name[128], value[256];
} EnvRequirement;

typedef struct {
  char nccl[64], gpu[256]; /* what the file requires ("" none) */
  EnvRequirement env[CB_MAX_ENV];
  int numEnv;
  char conflict[640];      /* "both X and Y" of one requirement, or a line not read ("" none): the file is refused */
} Requirements;

/* Sets `slot` to `value`, or notes a conflict where an earlier line of the file required another value: a
 * file of two configs joined (one measured on H100, one on H200) must not have its last line govern all. */
static void require(Requirements* wanted, const char* what, char* slot, size_t size, const char* value) {
  if (slot[0] && strcmp(slot, value) != 0) {
    if (!wanted->conflict[0])
      snprintf(wanted->conflict, sizeof(wanted->conflict), "both %s %s and %s %s", what, slot, what, value);
    return;
  }
  snprintf(slot, size, "%s", value);
}

/* "NAME=VALUE" of `# requires: env`: NAME once per file (another value is a conflict); a line without '=', an
 * empty or overlong NAME or VALUE, or more than CB_MAX_ENV of them refuse the file (the check could not be made). */
static void requireEnv(Requirements* wanted, char* text) {
  char* equals = strchr(text, '=');
  if (!equals || equals == text || (size_t)(equals - text) >= sizeof(wanted->env[0].name) ||
      strlen(equals + 1) >= sizeof(wanted->env[0].value) || !equals[1]) {
    if (!wanted->conflict[0]) snprintf(wanted->conflict, sizeof(wanted->conflict), "an unreadable env line (%.200s)", text);
    return;
  }
  *equals = '\0';
  const char* name = trim(text);
  const char* value = trim(equals + 1);
  for (int i = 0; i < wanted->numEnv; i++) {
    if (strcmp(wanted->env[i].name, name) != 0) continue;
    if (strcmp(wanted->env[i].value, value) != 0 && !wanted->conflict[0])
      snprintf(wanted->conflict, sizeof(wanted->conflict), "both env %s=%.200s and env %s=%.200s", name,
               wanted->env[i].value, name, value);
    return;
  }
  if (wanted->numEnv == CB_MAX_ENV) {
    if (!wanted->conflict[0]) snprintf(wanted->conflict, sizeof(wanted->conflict), "more than %d env lines", CB_MAX_ENV);
    return;
  }
  snprintf(wanted->env[wanted->numEnv].name, sizeof(wanted->env[0].name), "%s", name);
  snprintf(wanted->env[wanted->numEnv].value, sizeof(wanted->env[0].value), "%s", value);
  wanted->numEnv++;
}

/* "# requires: nccl X.Y.Z", "# requires: gpu NAME" or "# requires: env NAME=VALUE" (comments to NCCL's example
 * plugin) */
static void readRequirement(char* text, Requirements* wanted) {
  const char* key = "# requires:";
  if (strncmp(text, key, strlen(key)) != 0) return;
  char* rest = trim(text + strlen(key));
  if (strncmp(rest, "nccl ", 5) == 0) require(wanted, "nccl", wanted->nccl, sizeof(wanted->nccl), trim(rest + 5));
  else if (strncmp(rest, "gpu ", 4) == 0) require(wanted, "gpu", wanted->gpu, sizeof(wanted->gpu), trim(rest + 4));
  else if (strncmp(rest, "env ", 4) == 0) requireEnv(wanted, trim(rest + 4));
}

static void dropRules(Context* ctx) {
  free(ctx->rules);
  ctx->rules = NULL;
  ctx->numRules = 0;
}

/* Reads the rules; on any trouble the context keeps none (NCCL decides every call). Never fails. */
static void loadRules(Context* ctx, const char* path, void* loggerAddress) {
  ctx->reportFile = firstReader(path);
  FILE* file = fopen(path, "r");
  if (!file) {
    WARN_FILE(ctx, PREFIX "cannot open %s (%s): no rules, NCCL decides every call", path, strerror(errno));
    LOG(ctx, CB_LOG_INFO, PREFIX "no rules (cannot open %s) for nNodes=%zu nRanks=%zu: NCCL decides every call",
        path, ctx->nNodes, ctx->nRanks);
    return;
  }
  static const Requirements none;
  Requirements wanted = none;
  char* line = NULL;
  size_t capacity = 0;
  int lineNumber = 0, dropped = 0, outOfMemory = 0;
  ssize_t length;
  while ((length = getline(&line, &capacity, file)) >= 0) {
    lineNumber++;
    if (memchr(line, '\0', (size_t)length)) { /* the text after a NUL would be cut off: a rule read short */
      dropped++;
      WARN_FILE(ctx, PREFIX "%s line %d dropped: it holds a NUL byte", path, lineNumber);
      continue;
    }
    char* text = trim(line);
    if (text[0] == '#') readRequirement(text, &wanted);
    if (text[0] == '#' || text[0] == '\0') continue;
    Rule rule;
    const char* why = parseRule(text, &rule);
    if (why) {
      dropped++;
      WARN_FILE(ctx, PREFIX "%s line %d dropped: %s", path, lineNumber, why);
      continue;
    }
    Rule* grown = realloc(ctx->rules, (size_t)(ctx->numRules + 1) * sizeof(Rule));
    if (!grown) {
      outOfMemory = 1;
      break;
    }
    ctx->rules = grown;
    rule.lineNumber = lineNumber;
    ctx->rules[ctx->numRules++] = rule;
  }
  free(line);
  int readError = ferror(file) ? errno : 0;
  fclose(file);
  if (readError) { /* a folder, an I/O error: the rules read so far are not the file's */
    dropRules(ctx);
    WARN_FILE(ctx, PREFIX "cannot read %s (%s): no rules, NCCL decides every call", path, strerror(readError));
    LOG(ctx, CB_LOG_INFO, PREFIX "no rules (cannot read %s) for nNodes=%zu nRanks=%zu: NCCL decides every call",
        path, ctx->nNodes, ctx->nRanks);
    return;
  }
  if (outOfMemory) {
    dropRules(ctx);
    LOG(ctx, CB_LOG_WARN, PREFIX "out of memory reading %s: no rules, NCCL decides every call", path);
    return;
  }
  if (wanted.conflict[0]) {
    WARN_FILE(ctx, PREFIX "%s requires %s: no rules, NCCL decides every call (one config per NCCL version "
              "and system; do not join configs)", path, wanted.conflict);
    LOG(ctx, CB_LOG_INFO, PREFIX "no rules (%s requires %s) for nNodes=%zu nRanks=%zu", path, wanted.conflict,
        ctx->nNodes, ctx->nRanks);
    dropRules(ctx);
    return;
  }
  for (int i = 0; i < wanted.numEnv; i++) {
    /* NCCL sets its configuration files' settings in its environment (setenv, not overwriting) at its first
     * call, before it loads a tuner: getenv sees an /etc/nccl.conf setting as an exported one */
    const char* now = getenv(wanted.env[i].name);
    char have[256] = "", found[400] = "it unset";
    if (now) snprintf(have, sizeof(have), "%s", now);
    if (now) snprintf(found, sizeof(found), "%s=%s", wanted.env[i].name, trim(have));
    if (!now || strcmp(trim(have), wanted.env[i].value) != 0) {
      WARN_FILE(ctx, PREFIX "%s was measured with %s=%s, this process has %s: no rules, NCCL decides every call "
                "(NCCL's default differs under other settings)", path, wanted.env[i].name, wanted.env[i].value,
                found);
      LOG(ctx, CB_LOG_INFO, PREFIX "no rules (%s requires %s=%s) for nNodes=%zu nRanks=%zu", path, wanted.env[i].name,
          wanted.env[i].value, ctx->nNodes, ctx->nRanks);
      dropRules(ctx);
      return;
    }
  }
  char nccl[64] = "", gpu[256] = "";
  if (wanted.nccl[0]) {
    runningNccl(loggerAddress, nccl, sizeof(nccl));
    if (nccl[0] && strcmp(nccl, wanted.nccl) != 0) {
      WARN_FILE(ctx, PREFIX "%s is for NCCL %s, this is NCCL %s: no rules, NCCL decides every call (write one "
                "config per NCCL version)", path, wanted.nccl, nccl);
      LOG(ctx, CB_LOG_INFO, PREFIX "no rules (%s is for NCCL %s, not %s) for nNodes=%zu nRanks=%zu", path,
          wanted.nccl, nccl, ctx->nNodes, ctx->nRanks);
      dropRules(ctx);
      return;
    }
  }
  if (wanted.gpu[0]) {
    runningGpu(gpu, (int)sizeof(gpu));
    if (gpu[0] && strcmp(trim(gpu), wanted.gpu) != 0) {
      WARN_FILE(ctx, PREFIX "%s is for %s, this GPU is %s: no rules, NCCL decides every call (write one config "
                "per system)", path, wanted.gpu, trim(gpu));
      LOG(ctx, CB_LOG_INFO, PREFIX "no rules (%s is for %s, not %s) for nNodes=%zu nRanks=%zu", path, wanted.gpu,
          trim(gpu), ctx->nNodes, ctx->nRanks);
      dropRules(ctx);
      return;
    }
  }
  /* the rules this communicator can use: the others name another node or rank count */
  int forThis = 0;
  for (int i = 0; i < ctx->numRules; i++) {
    const Rule* r = &ctx->rules[i];
    forThis += (r->nNodes == -1 || (size_t)r->nNodes == ctx->nNodes) &&
               (r->nRanks == -1 || (size_t)r->nRanks == ctx->nRanks);
  }
  if ((wanted.nccl[0] && !nccl[0]) || (wanted.gpu[0] && !gpu[0])) {
    char ncclCheck[160] = "", gpuCheck[400] = "", checks[600]; /* each requirement's check */
    if (wanted.nccl[0])
      snprintf(ncclCheck, sizeof(ncclCheck), "its NCCL %s %s", wanted.nccl,
               nccl[0] ? "matches" : "is unchecked (this NCCL's version not found here)");
    if (wanted.gpu[0])
      snprintf(gpuCheck, sizeof(gpuCheck), "its GPU %s %s", wanted.gpu,
               gpu[0] ? "matches" : "is unchecked (no CUDA context found here)");
    snprintf(checks, sizeof(checks), "%s%s%s", ncclCheck, ncclCheck[0] && gpuCheck[0] ? ", " : "", gpuCheck);
    LOG(ctx, CB_LOG_INFO, PREFIX "loaded %d rule(s) from %s (%d line(s) dropped), %d of them for this communicator "
        "(nNodes=%zu nRanks=%zu)%s; a requirement unchecked, the rules used: %s", ctx->numRules, path, dropped,
        forThis, ctx->nNodes, ctx->nRanks, forThis ? "" : ": NCCL decides every call", checks);
    return;
  }
  LOG(ctx, CB_LOG_INFO, PREFIX "loaded %d rule(s) from %s (%d line(s) dropped), %d of them for this communicator "
      "(nNodes=%zu nRanks=%zu)%s", ctx->numRules, path, dropped, forThis, ctx->nNodes, ctx->nRanks,
      forThis ? "" : ": NCCL decides every call");
}

/* Never fails: NCCL fails the communicator's init when the tuner's init does (src/init.cc NCCLCHECK). */
static ncclResult_t commonInit(void** context, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction) {
  Context* ctx = calloc(1, sizeof(Context));
  *context = ctx; /* NULL (out of memory): getCollInfo leaves every call to NCCL */
  if (!ctx) {
    if (logFunction) logFunction(CB_LOG_WARN, CB_TUNING, __FILE__, __LINE__, PREFIX "out of memory: no rules");
    return CB_SUCCESS;
  }
  ctx->nRanks = nRanks;
  ctx->nNodes = nNodes;
  ctx->log = logFunction;
  const char* path = getenv("NCCL_TUNER_CONFIG_FILE");
  loadRules(ctx, path && *path ? path : "nccl_tuner.conf", (void*)logFunction);
  return CB_SUCCESS;
}

static ncclResult_t pluginInit(void** context, uint64_t commId, size_t nRanks, size_t nNodes,
                               ncclDebugLogger_t logFunction, cbNvlDomainInfo_t* nvlDomainInfo,
                               cbConstants_t* constants) {
  (void)commId;
  (void)constants; /* NCCL's model constants are left as NCCL set them */
  commonInit(context, nRanks, nNodes, logFunction);
  if (*context && nvlDomainInfo) {
    LOG((Context*)*context, CB_LOG_INFO, PREFIX "NCCL reports %d NVLink domain(s), %d-%d rank(s) each",
        nvlDomainInfo->nNvlDomains, nvlDomainInfo->minRanksPerNvlDomain, nvlDomainInfo->maxRanksPerNvlDomain);
  }
  return CB_SUCCESS;
}

static ncclResult_t pluginInitV4(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context) {
  return commonInit(context, nRanks, nNodes, logFunction);
}

static int matches(const Rule* r, const Context* ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                   int regBuff) {
  return r->collType == collType && nBytes >= r->minBytes && nBytes <= r->maxBytes &&
         (r->nNodes == -1 || (size_t)r->nNodes == ctx->nNodes) && (r->nRanks == -1 || (size_t)r->nRanks == ctx->nRanks) &&
         (r->numPipeOps == -1 || r->numPipeOps == numPipeOps) && (r->regBuff == -1 || r->regBuff == regBuff);
}

/* Whether NCCL relegated ring for this call: updateCollCostTable multiplies ring's entries by 1024 for fp8 beyond 8
 * ranks (src/enqueue.cc, v2.24.3-1 to v2.30.7-1) and the plugin cannot see the type. A ring entry over
 * RELEGATED_RATIO times the cheapest allowed entry of another algorithm is taken as relegated: NCCL's own ring
 * estimates stay within ~100x tree's even at small sizes over many ranks (its latency grows with the ring), far
 * below 1024x. */
#define RELEGATED_RATIO 256.0f
static int relegated(const float* table, int numAlgo, int numProto, int algorithm, int protocol) {
  if (algorithm != CB_ALGO_RING) return 0;
  float cheapest = -1.0f;
  for (int a = 0; a < numAlgo; a++) {
    if (a == CB_ALGO_RING) continue;
    for (int p = 0; p < numProto; p++) {
      float cost = table[a * numProto + p];
      if (cost >= 0.0f && (cheapest < 0.0f || cost < cheapest)) cheapest = cost;
    }
  }
  return cheapest > 0.0f && table[algorithm * numProto + protocol] > RELEGATED_RATIO * cheapest;
}

/* Never fails: NCCL fails the collective when getCollInfo does (src/enqueue.cc NCCLCHECK), whatever the
 * interface's comment says about falling back. */
static ncclResult_t pluginGetCollInfo(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                                      float** collCostTable, int numAlgo, int numProto, int regBuff,
                                      int* nChannels) {
  Context* ctx = (Context*)context;
  if (!ctx || !collCostTable || !nChannels) return CB_SUCCESS; /* nothing to go by: NCCL decides */
  /* NCCL passes a contiguous float[numAlgo][numProto] cast to float** */
  float* table = (float*)collCostTable;
  for (int i = 0; i < ctx->numRules; i++) {
    Rule* r = &ctx->rules[i];
    if (!matches(r, ctx, collType, nBytes, numPipeOps, regBuff)) continue;
    /* NCCL takes only entries >= 0 (src/enqueue.cc topoGetAlgoInfo): -1.0 is NCCL_ALGO_PROTO_IGNORE (x1024 where
     * relegated); a relegated ring (relegated()) stays positive */
    if (r->algorithm >= numAlgo || r->protocol >= numProto || !(table[r->algorithm * numProto + r->protocol] >= 0.0f) ||
        relegated(table, numAlgo, numProto, r->algorithm, r->protocol)) {
      if (!r->ignoreLogged) {
        r->ignoreLogged = 1;
        LOG(ctx, CB_LOG_INFO, PREFIX "rule on line %d (%s %s/%s) not applied: NCCL does not allow %s/%s for this "
            "call, or has relegated it (ring for fp8 beyond 8 ranks) (e.g. %zu bytes); NCCL's own choice stands "
            "(logged once)", r->lineNumber, COLLECTIVES[r->collType],
            ALGORITHMS[r->algorithm], PROTOCOLS[r->protocol], ALGORITHMS[r->algorithm], PROTOCOLS[r->protocol],
            nBytes);
      }
      return CB_SUCCESS;
    }
    table[r->algorithm * numProto + r->protocol] = 0.0f; /* the cheapest entry: NCCL picks it */
    if (r->nChannels > 0) *nChannels = r->nChannels;
    if (!r->appliedLogged) {
      r->appliedLogged = 1;
      LOG(ctx, CB_LOG_INFO, PREFIX "rule on line %d applied (first at %zu bytes): %s %s/%s channels=%s%d "
          "(logged once per rule)", r->lineNumber, nBytes, COLLECTIVES[r->collType], ALGORITHMS[r->algorithm],
          PROTOCOLS[r->protocol], r->nChannels > 0 ? "" : "NCCL's own, rule says ", r->nChannels);
    }
    return CB_SUCCESS;
  }
  return CB_SUCCESS;
}

static ncclResult_t pluginFinalize(void* context) {
  Context* ctx = (Context*)context;
  if (ctx) {
    free(ctx->rules);
    free(ctx);
  }
  return CB_SUCCESS;
}

__attribute__((visibility("default"))) const cbTuner_v6_t ncclTunerPlugin_v6 = {
    .name = PLUGIN_NAME, .init = pluginInit, .getCollInfo = pluginGetCollInfo, .finalize = pluginFinalize,
    .getChunkSize = NULL};
__attribute__((visibility("default"))) const cbTuner_v5_t ncclTunerPlugin_v5 = {
    .name = PLUGIN_NAME, .init = pluginInit, .getCollInfo = pluginGetCollInfo, .finalize = pluginFinalize};
__attribute__((visibility("default"))) const cbTuner_v4_t ncclTunerPlugin_v4 = {
    .name = PLUGIN_NAME, .init = pluginInitV4, .getCollInfo = pluginGetCollInfo, .destroy = pluginFinalize};
