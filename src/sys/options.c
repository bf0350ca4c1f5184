/* The options database: -fsdp_* options from FSDP_OPTIONS, the command line
   and the API, read by typed getters that also register each option for -help
   and for the unused-option report.  Later sources override earlier ones:
   FSDP_OPTIONS, then the command line, then FSDPOptionsSetValue.  -options_file
   FILE stands for FILE's options, in its place, wherever it is given. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fsdpimpl.h"

typedef enum { SOURCE_ENV, SOURCE_ARGV, SOURCE_API } OptionSource;

static const char *const source_names[] = {
    [SOURCE_ENV] = "FSDP_OPTIONS",
    [SOURCE_ARGV] = "the command line",
    [SOURCE_API] = "the program",
};

typedef struct {
  char *name;
  char *value; /* NULL: given without a value */
  char *from;  /* where it was given: a source name, or an options file and line */
  bool used;
} OptionEntry;

static struct {
  OptionEntry *entries;
  int nentries, capentries;
  char **registered; /* every name a getter asked for */
  int nregistered, capregistered;
  void **kept; /* options files' text and the argv made from them: the program's argv points into it */
  int nkept, capkept;
  bool help;
} db;

#define OPTION_PREFIX "-fsdp_"
#define OPTIONS_FILE "-options_file"
#define OPTIONS_FILE_DEPTH 8 /* files naming files: deeper than this is a loop */

#define OPTION_ERROR(...) FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_OPTION, __VA_ARGS__)

static FSDPErrorCode lookup(const char *name, const char *type, const char *defstr, const char *help,
                            OptionEntry **entry);

/* ------------------------------------------------------------------ tokens */

/* strtod, which raises FE_OVERFLOW on "1e999" and FE_UNDERFLOW on "1e-999":
   a bad option value is an error message, not a trap or a flag in the
   caller's program.  errno is strtod's. */
static double parse_double(const char *s, char **end)
{
  fenv_t fpenv;
  double x;
  int err;
  FSDPFPEnter_Private(&fpenv);
  x = strtod(s, end);
  err = errno;
  FSDPFPLeave_Private(&fpenv);
  errno = err;
  return x;
}

static bool is_number(const char *s)
{
  char *end;
  if (!*s) return false;
  (void)parse_double(s, &end);
  return *end == '\0';
}

/* A token that starts a new option rather than being a value ("-3" is a value). */
static bool is_key(const char *s) { return s[0] == '-' && !is_number(s); }

static bool is_options_file(const char *s)
{
  size_t n = strlen(OPTIONS_FILE);
  return strncasecmp(s, OPTIONS_FILE, n) == 0 && (s[n] == '\0' || s[n] == '=');
}

static bool is_library_option(const char *s)
{
  size_t n = strcspn(s, "=");
  return strncasecmp(s, OPTION_PREFIX, strlen(OPTION_PREFIX)) == 0 || (n == 5 && strncasecmp(s, "-help", 5) == 0) ||
         is_options_file(s);
}

static OptionEntry *find_entry(const char *name)
{
  for (int i = 0; i < db.nentries; i++)
    if (strcasecmp(db.entries[i].name, name) == 0) return &db.entries[i];
  return NULL;
}

static FSDPErrorCode set_value(const char *name, size_t namelen, const char *value, const char *from)
{
  char *key, *copy = NULL, *where;
  OptionEntry *e;
  FSDPErrorCode err;

  /* Copies first, so that a failure leaves the entry as it was. */
  FSDPCall(FSDPStrdup(from, &where));
  err = value ? FSDPStrdup(value, &copy) : FSDP_SUCCESS;
  if (!err) err = FSDPMalloc(namelen + 1, FSDP_MEM_OTHER, &key);
  if (err) {
    FSDPCall(FSDPFree(&where));
    FSDPCall(FSDPFree(&copy));
    FSDPCall(err);
  }
  memcpy(key, name, namelen);
  key[namelen] = '\0';
  e = find_entry(key);
  if (e) {
    FSDPCall(FSDPFree(&key));
    FSDPCall(FSDPFree(&e->value));
    FSDPCall(FSDPFree(&e->from));
  } else {
    err = FSDPGrowArray_Private(&db.entries, sizeof *db.entries, db.nentries + 1, &db.capentries, FSDP_MEM_OTHER);
    if (err) {
      FSDPCall(FSDPFree(&key));
      FSDPCall(FSDPFree(&where));
      FSDPCall(FSDPFree(&copy));
      FSDPCall(err);
    }
    e = &db.entries[db.nentries++];
    e->name = key;
  }
  e->value = copy;
  e->from = where;
  e->used = false;
  return FSDP_SUCCESS;
}

/* Words read from one source, each with where it was given. */
typedef struct {
  char **words;
  const char **from;
  int n, cap, capfrom;
  int files; /* options files read into it */
} WordList;

static FSDPErrorCode words_push(WordList *l, char *word, const char *from)
{
  FSDPCall(FSDPGrowArray_Private(&l->words, sizeof *l->words, l->n + 1, &l->cap, FSDP_MEM_OTHER));
  FSDPCall(FSDPGrowArray_Private(&l->from, sizeof *l->from, l->n + 1, &l->capfrom, FSDP_MEM_OTHER));
  l->words[l->n] = word;
  l->from[l->n++] = from;
  return FSDP_SUCCESS;
}

static FSDPErrorCode words_free(WordList *l)
{
  FSDPCall(FSDPFree(&l->words));
  FSDPCall(FSDPFree(&l->from));
  return FSDP_SUCCESS;
}

/* Memory that lives until FSDPFinalize (taken over even when keeping it fails). */
static FSDPErrorCode keep(void *p)
{
  FSDPErrorCode err = FSDPGrowArray_Private(&db.kept, sizeof *db.kept, db.nkept + 1, &db.capkept, FSDP_MEM_OTHER);
  if (err) FSDPCall(FSDPFree(&p));
  FSDPCall(err);
  db.kept[db.nkept++] = p;
  return FSDP_SUCCESS;
}

/* Insert options from a word list.  strict: every word must be a libfsdp
   option or its value (FSDP_OPTIONS, InsertString); otherwise other words
   belong to the program and are skipped (argv).  source: the list's own
   origin; words with another one came from options files. */
static FSDPErrorCode insert_words(const WordList *l, const char *source, bool strict)
{
  for (int i = 0; i < l->n; i++) {
    const char *t = l->words[i], *eq;
    if (!is_library_option(t)) {
      FSDPCheck(
          !strict, MPI_COMM_SELF, FSDP_ERR_OPTION,
          "%s: '%s' is not a libfsdp option (options start with " OPTION_PREFIX " or are -help or " OPTIONS_FILE ")%s",
          l->from[i], t,
          l->from[i] == source ? "" : "; only files named on the command line may hold the program's own options");
      continue;
    }
    eq = strchr(t, '=');
    if (eq) FSDPCall(set_value(t, (size_t)(eq - t), eq + 1, l->from[i]));
    /* A value is on its option's line: a file's last flag does not take the word after the file. */
    else if (i + 1 < l->n && !is_key(l->words[i + 1]) && l->from[i + 1] == l->from[i]) {
      FSDPCall(set_value(t, strlen(t), l->words[i + 1], l->from[i]));
      i++;
    } else FSDPCall(set_value(t, strlen(t), NULL, l->from[i]));
    if (is_options_file(t)) find_entry(OPTIONS_FILE)->used = true; /* expand() has read it */
  }
  return FSDP_SUCCESS;
}

/* Split a string at white space, honouring '...' and "..." quotes, in place.
   comments: a word that begins with # ends the string (options files). */
static FSDPErrorCode tokenize(char *s, const char *what, bool comments, int *ntokens, char ***tokens)
{
  int n = 0, cap = 0;
  char **tok = NULL;
  char *r = s, *w = s;

  *ntokens = 0;
  *tokens = NULL;
  while (*r) {
    char quote = 0;
    while (isspace((unsigned char)*r)) r++;
    if (!*r || (comments && *r == '#')) break;
    FSDPCall(FSDPGrowArray_Private(&tok, sizeof *tok, n + 1, &cap, FSDP_MEM_OTHER));
    tok[n++] = w;
    while (*r && (quote || !isspace((unsigned char)*r))) {
      if (quote && *r == quote) quote = 0;
      else if (!quote && (*r == '\'' || *r == '"')) quote = *r;
      else *w++ = *r;
      r++;
    }
    if (quote) FSDPCall(FSDPFree(&tok));
    FSDPCheck(!quote, MPI_COMM_SELF, FSDP_ERR_OPTION, "%s: unterminated %c quote", what, quote);
    if (*r) r++;
    *w++ = '\0';
  }
  *ntokens = n;
  *tokens = tok;
  return FSDP_SUCCESS;
}

static FSDPErrorCode expand(int n, char **words, const char *from, WordList *l, int depth);

/* One line of an options file: options, each with at most one value.  The
   line's text and name are kept (argv may point into them) if it has words. */
static FSDPErrorCode read_line(char *text, char *from, WordList *l, int depth)
{
  char **words;
  int n;
  FSDPErrorCode err = tokenize(text, from, true, &n, &words);

  if (!err && n == 0) {
    FSDPCall(FSDPFree(&text));
    FSDPCall(FSDPFree(&from));
    return FSDP_SUCCESS;
  }
  if (!err) err = keep(from);
  else FSDPCall(FSDPFree(&from)); /* the error has its own copy */
  if (!err) err = keep(text);
  else FSDPCall(FSDPFree(&text));
  for (int i = 0; i < n && !err; i++) {
    if (is_key(words[i])) continue;
    if (i == 0)
      err = OPTION_ERROR("%s: '%s' is not an option: a line holds options (-name [value]) or a # comment", from,
                         words[i]);
    else if (!is_key(words[i - 1]))
      err = OPTION_ERROR("%s: '%s' follows %s's value '%s': an option takes one value (quote a value with spaces)",
                         from, words[i], words[i - 2], words[i - 1]);
  }
  if (!err) err = expand(n, words, from, l, depth);
  FSDPCall(FSDPFree(&words));
  FSDPCall(err);
  return FSDP_SUCCESS;
}

/* Append FILE's options to l, each marked with its file and line. */
static FSDPErrorCode read_options_file(const char *file, const char *from, WordList *l, int depth)
{
  FILE *f;
  char *line = NULL, *where;
  size_t cap = 0;
  int lineno = 0;
  FSDPErrorCode err = FSDP_SUCCESS;

  FSDPCheck(depth <= OPTIONS_FILE_DEPTH, MPI_COMM_SELF, FSDP_ERR_OPTION,
            OPTIONS_FILE " '%s' (from %s): options files name each other more than %d deep (a file that names "
                         "itself?)",
            file, from, OPTIONS_FILE_DEPTH);
  f = fopen(file, "r");
  FSDPCheck(f, MPI_COMM_SELF, FSDP_ERR_IO, OPTIONS_FILE " '%s' (from %s): cannot open it: %s", file, from,
            strerror(errno));
  l->files++;
  while (!err && getline(&line, &cap, f) >= 0) {
    int len = snprintf(NULL, 0, "options file '%s' line %d", file, ++lineno);
    /* Editors that write a UTF-8 byte-order mark put it before the first line. */
    const char *start = lineno == 1 && !strncmp(line, "\xEF\xBB\xBF", 3) ? line + 3 : line;
    char *text = NULL;
    where = NULL;
    err = FSDPMalloc((size_t)len + 1, FSDP_MEM_OTHER, &where);
    if (!err) snprintf(where, (size_t)len + 1, "options file '%s' line %d", file, lineno);
    if (!err) err = FSDPStrdup(start, &text);
    if (!err) err = read_line(text, where, l, depth); /* takes both */
    else (void)FSDPFree(&where);
  }
  if (!err && ferror(f))
    err = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_IO,
                    OPTIONS_FILE " '%s' (from %s): cannot read it after line %d: %s", file, from, lineno,
                    strerror(errno));
  free(line);
  fclose(f);
  FSDPCall(err);
  return FSDP_SUCCESS;
}

/* Append words to l, replacing each -options_file FILE by FILE's options
   (the pair itself is kept, so that the database records the file). */
static FSDPErrorCode expand(int n, char **words, const char *from, WordList *l, int depth)
{
  for (int i = 0; i < n; i++) {
    const char *file = NULL;
    FSDPCall(words_push(l, words[i], from));
    if (!is_options_file(words[i])) continue;
    if (words[i][strlen(OPTIONS_FILE)] == '=') file = words[i] + strlen(OPTIONS_FILE) + 1;
    else if (i + 1 < n && !is_key(words[i + 1])) {
      file = words[++i];
      FSDPCall(words_push(l, words[i], from));
    }
    FSDPCheck(file && *file, MPI_COMM_SELF, FSDP_ERR_OPTION, OPTIONS_FILE " (from %s) needs a file name", from);
    FSDPCall(read_options_file(file, from, l, depth + 1));
  }
  return FSDP_SUCCESS;
}

static FSDPErrorCode insert_string(const char *options, OptionSource source)
{
  char *copy, **tokens;
  int n;
  WordList l = {0};
  FSDPErrorCode err;

  FSDPCall(FSDPStrdup(options, &copy));
  err = tokenize(copy, source_names[source], false, &n, &tokens);
  if (!err) err = expand(n, tokens, source_names[source], &l, 0);
  if (!err) err = insert_words(&l, source_names[source], true);
  FSDPCall(words_free(&l));
  FSDPCall(FSDPFree(&tokens));
  FSDPCall(FSDPFree(&copy));
  FSDPCall(err);
  return FSDP_SUCCESS;
}

/* The program's argv with each -options_file FILE replaced by FILE's words. */
static FSDPErrorCode replace_argv(const WordList *l, int *argc, char ***argv)
{
  char **args;
  int n = 0;

  FSDPCall(FSDPMalloc((size_t)(l->n + 2) * sizeof *args, FSDP_MEM_OTHER, &args));
  FSDPCall(keep(args));
  args[n++] = (*argv)[0];
  for (int i = 0; i < l->n; i++) {
    if (is_options_file(l->words[i])) {
      if (!strchr(l->words[i], '=')) i++; /* and its value */
      continue;
    }
    args[n++] = l->words[i];
  }
  args[n] = NULL;
  *argc = n;
  *argv = args;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptionsInitialize_Private(int *argc, char ***argv)
{
  const char *env = getenv("FSDP_OPTIONS");
  if (env) FSDPCall(insert_string(env, SOURCE_ENV));
  if (argc && argv && *argv && *argc > 1) {
    WordList l = {0};
    FSDPErrorCode err = expand(*argc - 1, *argv + 1, source_names[SOURCE_ARGV], &l, 0);
    if (!err) err = insert_words(&l, source_names[SOURCE_ARGV], false);
    if (!err && l.files) err = replace_argv(&l, argc, argv);
    FSDPCall(words_free(&l));
    FSDPCall(err);
  }
  /* Set before -help is read, so that -help lists itself under the header. */
  db.help = find_entry("-help") != NULL;
  if (db.help && FSDPWorldRank_Private() <= 0) {
    printf(
        "libfsdp %s options (given on the command line, in the FSDP_OPTIONS environment variable or in an " OPTIONS_FILE
        "):\n",
        FSDP_VERSION_STRING);
    fflush(stdout);
  }
  FSDPCall(
      FSDPOptionsGetBool("-help", "print every option with its type, default and description", false, &db.help, NULL));
  {
    OptionEntry *e; /* read when the files were: here only listed by -help and marked used */
    FSDPCall(lookup(OPTIONS_FILE, "string", "none",
                    "read options from this file as if given in its place: lines of -name [value], # comments", &e));
  }
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptionsFinalize_Private(void)
{
  for (int i = 0; i < db.nentries; i++) {
    FSDPCall(FSDPFree(&db.entries[i].name));
    FSDPCall(FSDPFree(&db.entries[i].value));
    FSDPCall(FSDPFree(&db.entries[i].from));
  }
  for (int i = 0; i < db.nregistered; i++) FSDPCall(FSDPFree(&db.registered[i]));
  for (int i = 0; i < db.nkept; i++) FSDPCall(FSDPFree(&db.kept[i]));
  FSDPCall(FSDPFree(&db.entries));
  FSDPCall(FSDPFree(&db.registered));
  FSDPCall(FSDPFree(&db.kept));
  memset(&db, 0, sizeof db);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptionsSetValue(const char *name, const char *value)
{
  FSDPCheck(name && name[0] == '-', MPI_COMM_SELF, FSDP_ERR_ARG, "option name '%s' must start with '-'",
            name ? name : "(null)");
  FSDPCheck(!is_options_file(name), MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPOptionsSetValue(\"%s\", ...) would not read the file: use FSDPOptionsInsertString(\"" OPTIONS_FILE
            " FILE\")",
            name);
  FSDPCall(set_value(name, strlen(name), value, source_names[SOURCE_API]));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptionsClearValue(const char *name)
{
  OptionEntry *e;
  FSDPCheck(name, MPI_COMM_SELF, FSDP_ERR_ARG, "option name must not be NULL");
  e = find_entry(name);
  if (!e) return FSDP_SUCCESS;
  FSDPCall(FSDPFree(&e->name));
  FSDPCall(FSDPFree(&e->value));
  FSDPCall(FSDPFree(&e->from));
  *e = db.entries[--db.nentries];
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptionsInsertString(const char *options)
{
  FSDPCheck(options, MPI_COMM_SELF, FSDP_ERR_ARG, "options string must not be NULL");
  FSDPCall(insert_string(options, SOURCE_API));
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ lookup */

/* Edit distance, case-insensitive: how "-fsdp_log_veiw" finds "-fsdp_log_view". */
static size_t distance(const char *a, const char *b)
{
  size_t la = strlen(a), lb = strlen(b), row[128], best;
  if (lb >= 128) return (size_t)-1;
  for (size_t j = 0; j <= lb; j++) row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t up = row[j];
      size_t cost = tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1]) ? 0 : 1;
      best = diag + cost;
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[lb];
}

/* The candidate nearest to word, if nearer than *nearest and near enough to be
   a typo; *nearest ((size_t)-1 at first) is updated, so calls can chain. */
static const char *closest(const char *word, const char *const *candidates, int n, size_t *nearest)
{
  const char *best = NULL;
  size_t typo = 3 + strlen(word) / 5; /* farther than this is not a typo */
  if (*nearest > typo) *nearest = typo;
  for (int i = 0; i < n; i++) {
    size_t d = distance(word, candidates[i]);
    if (d < *nearest) {
      *nearest = d;
      best = candidates[i];
    }
  }
  return best;
}

/* Register `name` and look it up.  Prints the -help line the first time. */
static FSDPErrorCode lookup(const char *name, const char *type, const char *defstr, const char *help,
                            OptionEntry **entry)
{
  bool known = false;
  OptionEntry *e;

  FSDPCheck(name && name[0] == '-', MPI_COMM_SELF, FSDP_ERR_ARG, "option name '%s' must start with '-'",
            name ? name : "(null)");
  for (int i = 0; i < db.nregistered && !known; i++) known = strcasecmp(db.registered[i], name) == 0;
  e = find_entry(name);
  if (!known) {
    FSDPCall(FSDPGrowArray_Private(&db.registered, sizeof *db.registered, db.nregistered + 1, &db.capregistered,
                                   FSDP_MEM_OTHER));
    FSDPCall(FSDPStrdup(name, &db.registered[db.nregistered++]));
    if (db.help && FSDPWorldRank_Private() <= 0) {
      printf("  %s <%s> (%s): %s", name, defstr, type, help ? help : "");
      if (e) printf(" [given: %s]", e->value ? e->value : "(no value)");
      printf("\n");
      fflush(stdout);
    }
  }
  if (e) e->used = true;
  *entry = e;
  return FSDP_SUCCESS;
}

static bool parse_int(const char *s, int64_t *v)
{
  char *end;
  long long x;
  errno = 0;
  x = strtoll(s, &end, 10);
  if (end == s || *end || errno == ERANGE) return false;
  *v = (int64_t)x;
  return true;
}

static bool parse_real(const char *s, double *v)
{
  char *end;
  double x;
  errno = 0;
  x = parse_double(s, &end);
  if (end == s || *end || isnan(x) || (errno == ERANGE && isinf(x))) return false;
  *v = x;
  return true;
}

static bool parse_bool(const char *s, bool *v)
{
  static const char *const yes[] = {"true", "yes", "on", "1"}, *const no[] = {"false", "no", "off", "0"};
  for (int i = 0; i < 4; i++) {
    if (strcasecmp(s, yes[i]) == 0) return *v = true, true;
    if (strcasecmp(s, no[i]) == 0) return *v = false, true;
  }
  return false;
}

/* An option given without a value, where one is required. */
static FSDPErrorCode need_value(const OptionEntry *e, const char *type)
{
  FSDPCheck(e->value, MPI_COMM_SELF, FSDP_ERR_OPTION, "option %s (from %s) needs a value (%s)", e->name, e->from, type);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptionsGetInt(const char *name, const char *help, int64_t defval, int64_t min, int64_t max,
                                int64_t *value, bool *set)
{
  char defstr[32];
  OptionEntry *e;
  int64_t v;

  FSDPCheck(value, MPI_COMM_SELF, FSDP_ERR_ARG, "value must not be NULL (option %s)", name ? name : "(null)");
  FSDPCheck(min <= defval && defval <= max, MPI_COMM_SELF, FSDP_ERR_ARG,
            "default %" PRId64 " of option %s is outside its range [%" PRId64 ", %" PRId64 "]", defval,
            name ? name : "(null)", min, max);
  snprintf(defstr, sizeof defstr, "%" PRId64, defval);
  FSDPCall(lookup(name, "int", defstr, help, &e));
  if (set) *set = e != NULL;
  *value = defval;
  if (!e) return FSDP_SUCCESS;
  FSDPCall(need_value(e, "an integer"));
  if (!parse_int(e->value, &v))
    return OPTION_ERROR("option %s: '%s' (from %s) is not an integer%s", name, e->value, e->from,
                        errno == ERANGE ? " that fits in 64 bits" : "");
  FSDPCheck(min <= v && v <= max, MPI_COMM_SELF, FSDP_ERR_OPTION,
            "option %s: %" PRId64 " (from %s) is out of range [%" PRId64 ", %" PRId64 "]", name, v, e->from, min, max);
  *value = v;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptionsGetReal(const char *name, const char *help, double defval, double *value, bool *set)
{
  char defstr[32];
  OptionEntry *e;

  FSDPCheck(value, MPI_COMM_SELF, FSDP_ERR_ARG, "value must not be NULL (option %s)", name ? name : "(null)");
  snprintf(defstr, sizeof defstr, "%g", defval);
  FSDPCall(lookup(name, "real", defstr, help, &e));
  if (set) *set = e != NULL;
  *value = defval;
  if (!e) return FSDP_SUCCESS;
  FSDPCall(need_value(e, "a real number"));
  if (!parse_real(e->value, value))
    return OPTION_ERROR("option %s: '%s' (from %s) is not a real number", name, e->value, e->from);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptionsGetBool(const char *name, const char *help, bool defval, bool *value, bool *set)
{
  OptionEntry *e;

  FSDPCheck(value, MPI_COMM_SELF, FSDP_ERR_ARG, "value must not be NULL (option %s)", name ? name : "(null)");
  FSDPCall(lookup(name, "bool", defval ? "true" : "false", help, &e));
  if (set) *set = e != NULL;
  *value = defval;
  if (!e) return FSDP_SUCCESS;
  if (!e->value) { /* a bare flag turns it on */
    *value = true;
    return FSDP_SUCCESS;
  }
  if (!parse_bool(e->value, value))
    return OPTION_ERROR("option %s: '%s' (from %s) is not a boolean (true/false, yes/no, on/off, 1/0)", name, e->value,
                        e->from);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptionsGetEnum(const char *name, const char *help, const char *const *choices, int defval, int *value,
                                 bool *set)
{
  FSDPCall(FSDPOptionsGetEnumAliased_Private(name, help, choices, NULL, defval, value, set));
  return FSDP_SUCCESS;
}

/* aliases: NULL, or one more name per choice (NULL where a choice has none),
   accepted as input; -help and views show the choices' own names. */
FSDPErrorCode FSDPOptionsGetEnumAliased_Private(const char *name, const char *help, const char *const *choices,
                                                const char *const *aliases, int defval, int *value, bool *set)
{
  char type[256] = "one of", also[256] = "";
  const char *guess;
  size_t nearest = (size_t)-1;
  OptionEntry *e;
  int n = 0;

  FSDPCheck(value && choices && choices[0], MPI_COMM_SELF, FSDP_ERR_ARG,
            "value and choices (non-empty, NULL-terminated) must not be NULL (option %s)", name ? name : "(null)");
  while (choices[n]) n++;
  FSDPCheck(defval >= 0 && defval < n, MPI_COMM_SELF, FSDP_ERR_ARG,
            "default %d of option %s is not an index of its %d choices", defval, name ? name : "(null)", n);
  for (int i = 0; i < n; i++) {
    size_t used = strlen(type);
    snprintf(type + used, sizeof type - used, " %s", choices[i]);
  }
  for (int i = 0; aliases && i < n; i++) {
    size_t used = strlen(also);
    if (aliases[i]) snprintf(also + used, sizeof also - used, "%s%s", used ? " " : " (or their aliases ", aliases[i]);
  }
  if (also[0]) strncat(also, ")", sizeof also - strlen(also) - 1);
  FSDPCall(lookup(name, type, choices[defval], help, &e));
  if (set) *set = e != NULL;
  *value = defval;
  if (!e) return FSDP_SUCCESS;
  FSDPCall(need_value(e, type));
  for (int i = 0; i < n; i++)
    if (strcasecmp(e->value, choices[i]) == 0 || (aliases && aliases[i] && strcasecmp(e->value, aliases[i]) == 0)) {
      *value = i;
      return FSDP_SUCCESS;
    }
  guess = closest(e->value, choices, n, &nearest);
  if (aliases) {
    for (int i = 0; i < n; i++) {
      const char *alias = aliases[i] ? closest(e->value, &aliases[i], 1, &nearest) : NULL;
      if (alias) guess = alias;
    }
  }
  return OPTION_ERROR("option %s: '%s' (from %s) is not %s%s%s%s%s", name, e->value, e->from, type, also,
                      guess ? "; did you mean '" : "", guess ? guess : "", guess ? "'?" : "");
}

FSDPErrorCode FSDPOptionsGetString(const char *name, const char *help, const char *defval, char *value, size_t len,
                                   bool *set)
{
  OptionEntry *e;
  const char *v;

  FSDPCheck(value && len > 0, MPI_COMM_SELF, FSDP_ERR_ARG, "value must not be NULL and len > 0 (option %s)",
            name ? name : "(null)");
  if (!defval) defval = "";
  FSDPCheck(strlen(defval) < len, MPI_COMM_SELF, FSDP_ERR_ARG, "default '%s' of option %s does not fit in %zu bytes",
            defval, name ? name : "(null)", len);
  FSDPCall(lookup(name, "string", defval, help, &e));
  if (set) *set = e != NULL;
  v = defval;
  if (e) {
    FSDPCall(need_value(e, "a string"));
    v = e->value;
    FSDPCheck(strlen(v) < len, MPI_COMM_SELF, FSDP_ERR_OPTION,
              "option %s: '%s' (from %s) is longer than %zu characters", name, v, e->from, len - 1);
  }
  memmove(value, v, strlen(v) + 1);
  return FSDP_SUCCESS;
}

/* Split a comma-separated list and parse each item with parse(item, &values[i]). */
static FSDPErrorCode get_list(const char *name, const char *help, const char *type, const char *itemdesc,
                              size_t elemsize, bool (*parse)(const char *, void *), void *values, int *n, bool *set)
{
  OptionEntry *e;
  char *copy, *item, *save = NULL;
  int count = 0, cap;
  FSDPErrorCode err = FSDP_SUCCESS;

  FSDPCheck(values && n && *n >= 0, MPI_COMM_SELF, FSDP_ERR_ARG, "values and n must not be NULL (option %s)",
            name ? name : "(null)");
  cap = *n;
  FSDPCall(lookup(name, type, "none", help, &e));
  if (set) *set = e != NULL;
  if (!e) return FSDP_SUCCESS;
  FSDPCall(need_value(e, type));
  FSDPCall(FSDPStrdup(e->value, &copy));
  /* Empty items ("1,,2" or a trailing comma) are mistakes, not zeros. */
  if (!*copy || copy[0] == ',' || copy[strlen(copy) - 1] == ',' || strstr(copy, ",,"))
    err = OPTION_ERROR("option %s: '%s' (from %s) has an empty item in its comma-separated list", name, e->value,
                       e->from);
  for (item = strtok_r(copy, ",", &save); !err && item; item = strtok_r(NULL, ",", &save)) {
    if (count >= cap)
      err = OPTION_ERROR("option %s: '%s' (from %s) has more than %d items", name, e->value, e->from, cap);
    else if (!parse(item, (char *)values + (size_t)count * elemsize))
      err = OPTION_ERROR("option %s: item '%s' of '%s' (from %s) is not %s", name, item, e->value, e->from, itemdesc);
    else count++;
  }
  FSDPCall(FSDPFree(&copy));
  FSDPCall(err);
  *n = count;
  return FSDP_SUCCESS;
}

static bool parse_int_item(const char *s, void *v) { return parse_int(s, v); }
static bool parse_real_item(const char *s, void *v) { return parse_real(s, v); }

FSDPErrorCode FSDPOptionsGetIntList(const char *name, const char *help, int64_t *values, int *n, bool *set)
{
  FSDPCall(get_list(name, help, "int list", "an integer", sizeof *values, parse_int_item, values, n, set));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptionsGetRealList(const char *name, const char *help, double *values, int *n, bool *set)
{
  FSDPCall(get_list(name, help, "real list", "a real number", sizeof *values, parse_real_item, values, n, set));
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ reports */

static FSDPErrorCode options_left(FSDPViewer viewer, void *ctx)
{
  int left = *(int *)ctx;
  if (!left) return FSDP_SUCCESS;
  FSDPCall(FSDPViewerASCIIPrintf(viewer, "WARNING: %d libfsdp option%s given but never used:\n", left,
                                 left == 1 ? " was" : "s were"));
  for (int i = 0; i < db.nentries; i++) {
    const OptionEntry *e = &db.entries[i];
    const char *guess;
    size_t nearest = (size_t)-1;
    if (e->used) continue;
    guess = closest(e->name, (const char *const *)db.registered, db.nregistered, &nearest);
    FSDPCall(FSDPViewerASCIIPrintf(viewer, "  %s %s (from %s)%s%s%s\n", e->name, e->value ? e->value : "(no value)",
                                   e->from, guess ? ": did you mean " : "", guess ? guess : "", guess ? "?" : ""));
  }
  return FSDP_SUCCESS;
}

static FSDPErrorCode options_view(FSDPViewer viewer, void *ctx)
{
  (void)ctx;
  FSDPCall(FSDPViewerASCIIPrintf(viewer, "libfsdp options database (%d option%s):\n", db.nentries,
                                 db.nentries == 1 ? "" : "s"));
  for (int i = 0; i < db.nentries; i++)
    FSDPCall(FSDPViewerASCIIPrintf(viewer, "  %s %s (from %s%s)\n", db.entries[i].name,
                                   db.entries[i].value ? db.entries[i].value : "", db.entries[i].from,
                                   db.entries[i].used ? "" : ", not used yet"));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptionsLeft(FSDPViewer viewer, int *nleft)
{
  int left = 0;

  for (int i = 0; i < db.nentries; i++) left += !db.entries[i].used;
  if (nleft) *nleft = left;
  /* Collective even with nothing to say here: another rank may have leftovers. */
  FSDPCall(FSDPViewerApply_Private(__func__, viewer, MPI_COMM_NULL, options_left, &left));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptionsView(FSDPViewer viewer)
{
  FSDPCall(FSDPViewerApply_Private(__func__, viewer, MPI_COMM_NULL, options_view, NULL));
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ settings every rank must give alike */

FSDPErrorCode FSDPSettingSet_Private(FSDPSetting *setting, const char *name, const char *fmt, ...)
{
  va_list ap;
  setting->name = name;
  va_start(ap, fmt);
  vsnprintf(setting->value, sizeof setting->value, fmt, ap);
  va_end(ap);
  return FSDP_SUCCESS;
}

/* One allreduce when every rank agrees.  Otherwise rank 0's values, then for
   each setting that differs the lowest rank with another value and that value:
   every rank builds the same message from them. */
FSDPErrorCode FSDPSettingsAgree_Private(MPI_Comm comm, const char *caller, int n, const FSDPSetting *settings)
{
  uint64_t hash[2 * FSDP_MAX_SETTINGS];
  char root[FSDP_MAX_SETTINGS][FSDP_SETTING_LEN], other[FSDP_SETTING_LEN], text[FSDP_MAX_MESSAGE - 200] = "";
  int first[FSDP_MAX_SETTINGS], rank, size, ndiffer = 0, nreal = 0, shown = 0;

  /* The same on every rank (a fixed list per caller): no rank can leave here alone. */
  FSDPCheck(n >= 0 && n <= FSDP_MAX_SETTINGS, MPI_COMM_SELF, FSDP_ERR_INTERNAL,
            "%s: %d settings to agree on, at most %d", caller, n, FSDP_MAX_SETTINGS);
  FSDPCallMPI(MPI_Comm_rank(comm, &rank));
  FSDPCallMPI(MPI_Comm_size(comm, &size));
  for (int k = 0; k < n; k++) {
    hash[k] = FSDPHashBytes_Private(FSDP_HASH_INIT, settings[k].value, strlen(settings[k].value) + 1);
    hash[n + k] = ~hash[k]; /* the minimum of ~h is ~(the maximum of h) */
  }
  FSDPCallMPI(FSDPAllreduce_Private(MPI_IN_PLACE, hash, 2 * n, MPI_UINT64_T, MPI_MIN, comm));
  for (int k = 0; k < n; k++) ndiffer += hash[k] != ~hash[n + k];
  if (!ndiffer) return FSDP_SUCCESS;
  for (int k = 0; k < n; k++) memcpy(root[k], settings[k].value, FSDP_SETTING_LEN);
  FSDPCallMPI(FSDPBcast_Private(root, n * FSDP_SETTING_LEN, MPI_CHAR, 0, comm));
  for (int k = 0; k < n; k++) first[k] = strcmp(root[k], settings[k].value) ? rank : size;
  FSDPCallMPI(FSDPAllreduce_Private(MPI_IN_PLACE, first, n, MPI_INT, MPI_MIN, comm));
  for (int k = 0; k < n; k++) {
    size_t used = strlen(text);
    if (first[k] == size) continue; /* the hashes differed, the values not: cannot happen */
    nreal++;
    if (rank == first[k]) memcpy(other, settings[k].value, FSDP_SETTING_LEN);
    FSDPCallMPI(FSDPBcast_Private(other, FSDP_SETTING_LEN, MPI_CHAR, first[k], comm));
    if (used + 2 * FSDP_SETTING_LEN + 96 > sizeof text) continue; /* room for the end: counted below */
    snprintf(text + used, sizeof text - used, "%s%s differs across ranks: rank 0 has %.63s, rank %d has %.63s",
             shown ? "; " : "", settings[k].name, root[k][0] ? root[k] : "(none)", first[k],
             other[0] ? other : "(none)");
    shown++;
  }
  if (!shown) return FSDP_SUCCESS;
  FSDPCheck(false, MPI_COMM_SELF, FSDP_ERR_ARG,
            "%s: %s%s; every rank must give the same (doc/options.md lists the settings that must agree)", caller, text,
            nreal > shown ? " (and more)" : "");
  return FSDP_SUCCESS;
}

bool FSDPParseBytes_Private(const char *text, int64_t *bytes)
{
  static const char units[] = "KMGT";
  char *end;
  double v, scale = 1;
  bool ok;
  fenv_t fpenv; /* strtod raises overflow on 1e999: a message, not a flag in the caller's program */

  FSDPFPEnter_Private(&fpenv);
  v = strtod(text, &end);
  if (end != text && *end && strchr(units, toupper((unsigned char)*end))) {
    for (const char *u = units; *u != toupper((unsigned char)*end); u++) scale *= 1024;
    scale *= 1024;
    end++;
    if (!strcasecmp(end, "iB")) end += 2;
  }
  /* A positive size below a byte (0.4) would read as 0, which means none. */
  ok = end != text && !*end && v >= 0 && v * scale < 9.2e18 && (v == 0 || v * scale >= 1);
  if (ok) *bytes = (int64_t)(v * scale);
  FSDPFPLeave_Private(&fpenv);
  return ok;
}
