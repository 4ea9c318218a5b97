/* Plain lines of line protocol to value columns, in C: the fast path of
 * schemas/line_decoder.py for the lines that nearly every capture is made of.
 *
 * decode(lines, field_types) takes a list of str and returns
 *   (kinds, strict, other):
 *   kinds:  for each kind of lines (same measurement, keys and separators) whose rows it
 *           read, in order of its first line:
 *           (names, tag_count, rows, times, [(codes, values) per tag], [column per field],
 *            repeats)
 *           names: (measurement, tag keys..., field keys...) as str; rows: int64 line
 *           positions; times: int64; codes: int32 indices into values (one str per distinct
 *           value); a field column: float64, int64 or bool (one byte) values. Every buffer is
 *           a bytearray, so numpy views of it are writable. repeats: whether two rows share
 *           every tag and their stamp.
 *   strict: int64 positions of plain lines it did not vouch for (the strict decoder's)
 *   other:  int64 positions of lines that are not plain (not printable ASCII, or holding a
 *           backslash or a quote): the numpy path reads those.
 * field_types(names, tag_count) is asked once per kind, at its first line: bytes with one type
 * code per field ("f" float, "i" int, "b" bool), or None when the strict decoder must read the
 * kind's lines. A line's values are read as soon as it is cut, while its bytes are in the
 * CPU's caches (read a kind at a time after the whole block, they had been evicted).
 *
 * It vouches for exactly the spellings the numpy path vouches for (line_decoder_values.py),
 * with the same values, and sends a row to the strict decoder on anything else, so both
 * paths give the strict decoder's frames (tests/test_line_decoder.py holds both to it):
 *   float  -?[0-9.]* with at most one point and 1 to 14 digits: m / 10**r, both exact
 *          doubles, one correctly rounded division (what float() gives);
 *   int    -?[0-9]{1,18}i;   bool  true | false;   time  [0-9]{1,19}, at most MAX_TIME_NS;
 *   tag    1 to 248 bytes.
 */
#include "plain_common.h"
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define MAX_LINE_CHARS (1 << 20)          /* codec.MAX_LINE_CHARS */
#define MOST_TAG_BYTES 248                /* line_decoder_values: PAD - 8 */
#define MAX_TIME_NS 9223372036854775806ULL /* codec.MAX_TIME_NS: 2**63 - 2 */

static const double POW10[] = {1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                               1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};

/* Per byte: 0 plain, 1 a separator (space, comma, equals sign), 2 a byte a plain line may not
 * hold (not printable ASCII, a backslash, a quote). */
static unsigned char BYTE_CLASS[256];

static void classes_init(void) {
    for (int c = 0; c < 256; c++) BYTE_CLASS[c] = (c < 0x20 || c > 0x7E || c == '\\' || c == '"') ? 2 : 0;
    BYTE_CLASS[' '] = BYTE_CLASS[','] = BYTE_CLASS['='] = 1;
}

/* The count of tag keys when the separators are those of m(,k=v)* k=v(,k=v)* t with no empty
 * measurement or key, else -1. */
static int line_form(const char *codes, const uint32_t *seps, int count) {
    int k = 0, tags = 0;
    if (count < 3 || count % 2 == 0 || seps[0] == 0) return -1;
    while (k + 1 < count && codes[k] == ',' && codes[k + 1] == '=') k += 2, tags++;
    if (codes[k] != ' ' || k + 1 >= count || codes[k + 1] != '=') return -1;
    k += 2;
    while (k + 1 < count && codes[k] == ',' && codes[k + 1] == '=') k += 2;
    if (k != count - 1 || codes[k] != ' ') return -1;
    for (int j = 0; 2 * j + 1 < count; j++)
        if (seps[2 * j + 1] == seps[2 * j] + 1) return -1; /* an empty key */
    return tags;
}

static int read_float(const char *s, Py_ssize_t n, double *out) {
    Py_ssize_t i = 0;
    int negative = 0, digits = 0, point = -1;
    uint64_t m = 0;
    if (n > 0 && s[0] == '-') negative = 1, i = 1;
    for (; i < n; i++) {
        char c = s[i];
        if (c >= '0' && c <= '9') {
            m = m * 10 + (uint64_t)(c - '0');
            if (++digits > 14) return 0;
            if (point >= 0) point++;
        } else if (c == '.' && point < 0) {
            point = 0;
        } else {
            return 0;
        }
    }
    if (digits == 0) return 0;
    double value = (double)m / POW10[point > 0 ? point : 0];
    *out = negative ? -value : value;
    return 1;
}

static int read_int(const char *s, Py_ssize_t n, int64_t *out) {
    if (n < 2 || s[n - 1] != 'i') return 0;
    Py_ssize_t i = 0, end = n - 1;
    int negative = 0;
    if (s[0] == '-') negative = 1, i = 1;
    if (end - i < 1 || end - i > 18) return 0;
    int64_t value = 0;
    for (; i < end; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        value = value * 10 + (s[i] - '0');
    }
    *out = negative ? -value : value;
    return 1;
}

static int read_bool(const char *s, Py_ssize_t n, unsigned char *out) {
    if (n == 4 && memcmp(s, "true", 4) == 0) return *out = 1, 1;
    if (n == 5 && memcmp(s, "false", 5) == 0) return *out = 0, 1;
    return 0;
}

static int read_time(const char *s, Py_ssize_t n, int64_t *out) {
    if (n < 1 || n > 19) return 0;
    uint64_t value = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        value = value * 10 + (uint64_t)(s[i] - '0');
    }
    if (value > MAX_TIME_NS) return 0;
    *out = (int64_t)value;
    return 1;
}

/* Distinct values of one tag column: each a code, and one str made per value. */
typedef struct {
    Py_ssize_t *slots; /* code, or -1 */
    Py_ssize_t size;   /* of slots: a power of two */
    Buffer found;      /* per code: its Spelt */
    PyObject *values;  /* list of str, by code */
} Interned;

typedef struct {
    uint64_t hash;
    const char *at;
    Py_ssize_t length;
} Spelt;

static int interned_init(Interned *t) {
    t->size = 64;
    t->slots = malloc(sizeof(Py_ssize_t) * (size_t)t->size);
    t->values = PyList_New(0);
    if (t->slots == NULL || t->values == NULL) return -1;
    for (Py_ssize_t i = 0; i < t->size; i++) t->slots[i] = -1;
    return 0;
}

static void interned_free(Interned *t) {
    free(t->slots);
    free(t->found.data);
    Py_XDECREF(t->values);
}

static int interned_grow(Interned *t) {
    Py_ssize_t size = 2 * t->size;
    Py_ssize_t *slots = malloc(sizeof(Py_ssize_t) * (size_t)size);
    if (slots == NULL) return -1;
    for (Py_ssize_t i = 0; i < size; i++) slots[i] = -1;
    const Spelt *found = (const Spelt *)t->found.data;
    Py_ssize_t count = t->found.size / (Py_ssize_t)sizeof(Spelt);
    for (Py_ssize_t code = 0; code < count; code++) {
        Py_ssize_t at = (Py_ssize_t)(found[code].hash & (uint64_t)(size - 1));
        while (slots[at] >= 0) at = (at + 1) & (size - 1);
        slots[at] = code;
    }
    free(t->slots);
    t->slots = slots;
    t->size = size;
    return 0;
}

/* The code of a value (its bytes stay where they are until the decoder returns); -1 on error. */
static Py_ssize_t interned_code(Interned *t, const char *s, Py_ssize_t n) {
    uint64_t hash = fnv1a(s, n, FNV_OFFSET);
    Py_ssize_t at = (Py_ssize_t)(hash & (uint64_t)(t->size - 1));
    const Spelt *found = (const Spelt *)t->found.data;
    for (; t->slots[at] >= 0; at = (at + 1) & (t->size - 1)) {
        const Spelt *other = &found[t->slots[at]];
        if (other->hash == hash && other->length == n && memcmp(other->at, s, n) == 0)
            return t->slots[at];
    }
    Py_ssize_t code = t->found.size / (Py_ssize_t)sizeof(Spelt);
    Spelt spelt = {hash, s, n};
    PyObject *value = PyUnicode_FromStringAndSize(s, n);
    if (value == NULL) return -1;
    if (PyList_Append(t->values, value) < 0 || buffer_add(&t->found, &spelt, sizeof(Spelt)) < 0) {
        Py_DECREF(value);
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return -1;
    }
    Py_DECREF(value);
    t->slots[at] = code;
    if (2 * (code + 1) > t->size && interned_grow(t) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return code;
}

/* A kind: its measurement and keys, and the values read of its lines. Lines are
 * m(,k=v)* k=v(,k=v)* t, so key j stands between separators 2j and 2j + 1 and its value
 * between 2j + 1 and 2j + 2: the counts of tags and fields and the keys are the kind. */
typedef struct {
    uint64_t hash; /* of the measurement, the counts and each key's length: checked by keys */
    int tags, fields;
    char *keys;         /* the measurement, then each key, one after another */
    uint32_t *key_ends; /* where each of those ends in keys */
    PyObject *names;    /* (measurement, keys...) as str */
    char *types;        /* a type code per field; NULL: the strict decoder reads its lines */
    Buffer rows, times; /* int64: the positions and stamps of the lines read */
    Buffer *codes;      /* per tag: int32 codes into interned[j] */
    Buffer *columns;    /* per field: float64, int64 or one-byte bool values */
    Interned *interned; /* per tag */
    unsigned char *row; /* a line's field values, until all of them read */
    int32_t *row_codes; /* a line's tag codes, likewise */
} Kind;

typedef struct {
    Kind *kinds;
    Py_ssize_t count, capacity;
    Py_ssize_t *table; /* open addressing by hash: an index into kinds, or -1 */
    Py_ssize_t table_size;
} Kinds;

static int kinds_grow_table(Kinds *k) {
    Py_ssize_t size = k->table_size ? 2 * k->table_size : 64;
    Py_ssize_t *table = malloc(sizeof(Py_ssize_t) * (size_t)size);
    if (table == NULL) return -1;
    for (Py_ssize_t i = 0; i < size; i++) table[i] = -1;
    for (Py_ssize_t i = 0; i < k->count; i++) {
        Py_ssize_t at = (Py_ssize_t)(k->kinds[i].hash & (uint64_t)(size - 1));
        while (table[at] >= 0) at = (at + 1) & (size - 1);
        table[at] = i;
    }
    free(k->table);
    k->table = table;
    k->table_size = size;
    return 0;
}

/* Whether the line (separators at seps) has the kind's measurement and keys. */
static int kind_matches(const Kind *kind, const char *s, const uint32_t *seps, int values) {
    if (kind->tags + kind->fields != values) return 0;
    if (kind->key_ends[0] != seps[0] || memcmp(kind->keys, s, seps[0]) != 0) return 0;
    for (int j = 0; j < values; j++) {
        uint32_t start = kind->key_ends[j], end = kind->key_ends[j + 1];
        if (end - start != seps[2 * j + 1] - seps[2 * j] - 1 ||
            memcmp(kind->keys + start, s + seps[2 * j] + 1, end - start) != 0)
            return 0;
    }
    return 1;
}

static PyObject *kind_names(const Kind *kind) {
    int count = 1 + kind->tags + kind->fields;
    PyObject *names = PyTuple_New(count);
    if (names == NULL) return NULL;
    for (int j = 0; j < count; j++) {
        uint32_t start = j ? kind->key_ends[j - 1] : 0;
        PyObject *name = PyUnicode_FromStringAndSize(kind->keys + start, kind->key_ends[j] - start);
        if (name == NULL) {
            Py_DECREF(names);
            return NULL;
        }
        PyTuple_SET_ITEM(names, j, name);
    }
    return names;
}

/* Asks field_types of a new kind, and makes room for its values if it is to be read. */
static int kind_start(Kind *kind, PyObject *field_types) {
    kind->names = kind_names(kind);
    if (kind->names == NULL) return -1;
    PyObject *types = PyObject_CallFunction(field_types, "Oi", kind->names, kind->tags);
    if (types == NULL) return -1;
    int read = PyBytes_Check(types) && PyBytes_GET_SIZE(types) == kind->fields;
    if (read) {
        kind->types = malloc((size_t)kind->fields + 1);
        kind->codes = calloc((size_t)kind->tags + 1, sizeof(Buffer));
        kind->columns = calloc((size_t)kind->fields + 1, sizeof(Buffer));
        kind->interned = calloc((size_t)kind->tags + 1, sizeof(Interned));
        kind->row = malloc(8 * ((size_t)kind->fields + 1));
        kind->row_codes = malloc(sizeof(int32_t) * ((size_t)kind->tags + 1));
        if (kind->types) memcpy(kind->types, PyBytes_AS_STRING(types), (size_t)kind->fields);
    }
    Py_DECREF(types);
    if (!read) return 0;
    if (!kind->types || !kind->codes || !kind->columns || !kind->interned || !kind->row ||
        !kind->row_codes) {
        PyErr_NoMemory();
        return -1;
    }
    for (int j = 0; j < kind->tags; j++)
        if (interned_init(&kind->interned[j]) < 0) {
            if (!PyErr_Occurred()) PyErr_NoMemory();
            return -1;
        }
    return 0;
}

/* The line's kind, made (and started) if new; NULL on error. */
static Kind *kinds_find(Kinds *k, const char *s, const uint32_t *seps, int tags, int values,
                        uint64_t hash, PyObject *field_types) {
    if (2 * (k->count + 1) > k->table_size && kinds_grow_table(k) < 0) return NULL;
    Py_ssize_t at = (Py_ssize_t)(hash & (uint64_t)(k->table_size - 1));
    while (k->table[at] >= 0) {
        Kind *kind = &k->kinds[k->table[at]];
        if (kind->hash == hash && kind->tags == tags && kind_matches(kind, s, seps, values))
            return kind;
        at = (at + 1) & (k->table_size - 1);
    }
    if (k->count == k->capacity) {
        Py_ssize_t capacity = k->capacity ? 2 * k->capacity : 16;
        Kind *kinds = realloc(k->kinds, sizeof(Kind) * (size_t)capacity);
        if (kinds == NULL) return NULL;
        k->kinds = kinds;
        k->capacity = capacity;
    }
    Kind *kind = &k->kinds[k->count];
    memset(kind, 0, sizeof(Kind));
    kind->tags = tags;
    kind->fields = values - tags;
    kind->hash = hash;
    kind->keys = malloc((size_t)seps[2 * values - 1] + 1);
    kind->key_ends = malloc(sizeof(uint32_t) * (size_t)(values + 1));
    k->table[at] = k->count++; /* counted now, so that kinds_free frees what it holds */
    if (kind->keys == NULL || kind->key_ends == NULL) return NULL;
    memcpy(kind->keys, s, seps[0]);
    kind->key_ends[0] = seps[0];
    for (int j = 0; j < values; j++) {
        uint32_t length = seps[2 * j + 1] - seps[2 * j] - 1;
        memcpy(kind->keys + kind->key_ends[j], s + seps[2 * j] + 1, length);
        kind->key_ends[j + 1] = kind->key_ends[j] + length;
    }
    if (kind_start(kind, field_types) < 0) return NULL;
    return kind;
}

static void kinds_free(Kinds *k) {
    for (Py_ssize_t i = 0; i < k->count; i++) {
        Kind *kind = &k->kinds[i];
        free(kind->keys);
        free(kind->key_ends);
        Py_XDECREF(kind->names);
        free(kind->rows.data);
        free(kind->times.data);
        for (int j = 0; kind->codes && j < kind->tags; j++) free(kind->codes[j].data);
        for (int j = 0; kind->columns && j < kind->fields; j++) free(kind->columns[j].data);
        for (int j = 0; kind->interned && j < kind->tags; j++) interned_free(&kind->interned[j]);
        free(kind->types);
        free(kind->codes);
        free(kind->columns);
        free(kind->interned);
        free(kind->row);
        free(kind->row_codes);
    }
    free(k->kinds);
    free(k->table);
}

/* Reads a line of a kind that is read: 1 when its values are added, 0 when the fast path does
 * not vouch for one of them (the strict decoder's line), -1 on error. */
static int read_line(Kind *kind, const char *s, Py_ssize_t n, const uint32_t *seps, int count,
                     int64_t position) {
    int tags = kind->tags, fields = kind->fields;
    for (int j = 0; j < fields; j++) {
        uint32_t start = seps[2 * (tags + j) + 1] + 1, end = seps[2 * (tags + j) + 2];
        unsigned char *value = kind->row + 8 * j;
        const char *token = s + start;
        Py_ssize_t length = (Py_ssize_t)(end - start);
        int ok = kind->types[j] == 'f'   ? read_float(token, length, (double *)value)
                 : kind->types[j] == 'i' ? read_int(token, length, (int64_t *)value)
                                         : read_bool(token, length, value);
        if (!ok) return 0;
    }
    int64_t time;
    if (!read_time(s + seps[count - 1] + 1, n - seps[count - 1] - 1, &time)) return 0;
    for (int j = 0; j < tags; j++) {
        uint32_t start = seps[2 * j + 1] + 1, end = seps[2 * j + 2];
        if (end <= start || end - start > MOST_TAG_BYTES) return 0;
    }
    /* Only a line that is read adds its tag values: a kind's distinct values, in the order
     * first seen, are those of its rows (Frame.tag_codes: what a factorization gives). */
    for (int j = 0; j < tags; j++) {
        uint32_t start = seps[2 * j + 1] + 1, end = seps[2 * j + 2];
        Py_ssize_t code = interned_code(&kind->interned[j], s + start, (Py_ssize_t)(end - start));
        if (code < 0) return -1;
        kind->row_codes[j] = (int32_t)code;
    }
    if (buffer_add(&kind->rows, &position, 8) < 0 || buffer_add(&kind->times, &time, 8) < 0)
        goto nomemory;
    for (int j = 0; j < tags; j++)
        if (buffer_add(&kind->codes[j], &kind->row_codes[j], 4) < 0) goto nomemory;
    for (int j = 0; j < fields; j++)
        if (buffer_add(&kind->columns[j], kind->row + 8 * j, kind->types[j] == 'b' ? 1 : 8) < 0)
            goto nomemory;
    return 1;
nomemory:
    PyErr_NoMemory();
    return -1;
}

/* Whether two rows share every tag (by code) and their stamp: a line that repeats another, which
 * the replay must count and drop. */
static int repeats_a_row(const Kind *kind) {
    Py_ssize_t rows = kind->rows.size / 8, size = 16;
    const int64_t *times = (const int64_t *)kind->times.data;
    while (size < 2 * rows) size *= 2;
    Py_ssize_t *slots = malloc(sizeof(Py_ssize_t) * (size_t)size);
    if (slots == NULL) return -1;
    for (Py_ssize_t i = 0; i < size; i++) slots[i] = -1;
    int found = 0;
    for (Py_ssize_t r = 0; r < rows && !found; r++) {
        uint64_t hash = (uint64_t)times[r] * 0x9E3779B97F4A7C15ULL;
        for (int j = 0; j < kind->tags; j++)
            hash = (hash ^ (uint64_t)((const int32_t *)kind->codes[j].data)[r]) * FNV_PRIME;
        Py_ssize_t at = (Py_ssize_t)((hash ^ (hash >> 29)) & (uint64_t)(size - 1));
        for (; slots[at] >= 0; at = (at + 1) & (size - 1)) {
            Py_ssize_t other = slots[at];
            int same = times[other] == times[r];
            for (int j = 0; same && j < kind->tags; j++) {
                const int32_t *codes = (const int32_t *)kind->codes[j].data;
                same = codes[other] == codes[r];
            }
            if (same) {
                found = 1;
                break;
            }
        }
        slots[at] = r;
    }
    free(slots);
    return found;
}

/* A read kind's tuple (see the top of this file). */
static PyObject *kind_result(const Kind *kind) {
    int repeats = repeats_a_row(kind);
    if (repeats < 0) return PyErr_NoMemory();
    PyObject *tags = PyList_New(kind->tags), *fields = PyList_New(kind->fields), *result = NULL;
    if (tags == NULL || fields == NULL) goto done;
    for (int j = 0; j < kind->tags; j++) {
        PyObject *pair = Py_BuildValue("(NO)", buffer_bytes(&kind->codes[j]),
                                       kind->interned[j].values);
        if (pair == NULL) goto done;
        PyList_SET_ITEM(tags, j, pair);
    }
    for (int j = 0; j < kind->fields; j++) {
        PyObject *column = buffer_bytes(&kind->columns[j]);
        if (column == NULL) goto done;
        PyList_SET_ITEM(fields, j, column);
    }
    result = Py_BuildValue("(OiNNOOO)", kind->names, kind->tags, buffer_bytes(&kind->rows),
                           buffer_bytes(&kind->times), tags, fields,
                           repeats ? Py_True : Py_False);
done:
    Py_XDECREF(tags);
    Py_XDECREF(fields);
    return result;
}

/* Where the line's separators stand (seps) and which they are (codes); returns their count,
 * or -1 when the line is not plain. Sixteen bytes at a time where SSE2 is there (every
 * x86-64): a separator comes every few bytes, too often to branch on each byte. */
static Py_ssize_t find_separators(const char *s, Py_ssize_t n, uint32_t *seps, char *codes) {
    Py_ssize_t i = 0, count = 0;
    int odd = 0;
#ifdef __SSE2__
    const __m128i space = _mm_set1_epi8(' '), comma = _mm_set1_epi8(','),
                  equals = _mm_set1_epi8('='), below = _mm_set1_epi8(0x20),
                  delete = _mm_set1_epi8(0x7F), backslash = _mm_set1_epi8('\\'),
                  quote = _mm_set1_epi8('"');
    __m128i bad = _mm_setzero_si128();
    for (; i + 16 <= n; i += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
        __m128i separator = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, space),
                                                      _mm_cmpeq_epi8(v, comma)),
                                         _mm_cmpeq_epi8(v, equals));
        /* Signed: bytes of 0x80 and above are below 0x20 too. */
        bad = _mm_or_si128(bad, _mm_or_si128(_mm_or_si128(_mm_cmplt_epi8(v, below),
                                                          _mm_cmpeq_epi8(v, delete)),
                                             _mm_or_si128(_mm_cmpeq_epi8(v, backslash),
                                                          _mm_cmpeq_epi8(v, quote))));
        unsigned mask = (unsigned)_mm_movemask_epi8(separator);
        while (mask) {
            int bit = __builtin_ctz(mask);
            seps[count] = (uint32_t)(i + bit);
            codes[count++] = s[i + bit];
            mask &= mask - 1;
        }
    }
    odd = _mm_movemask_epi8(bad) != 0;
#endif
    for (; i < n; i++) {
        unsigned char kind = BYTE_CLASS[(unsigned char)s[i]];
        seps[count] = (uint32_t)i;
        codes[count] = s[i];
        count += kind == 1;
        odd |= kind == 2;
    }
    return odd ? -1 : count;
}

typedef struct {
    Kinds kinds;
    Buffer strict, other; /* int64 positions */
    Buffer seps, codes;   /* one line's separators: where, and which */
    PyObject *field_types;
} Reader;

/* Reads a line: its values into its kind, or its position into strict (plain, but not of the
 * form, too long, or a value the fast path does not vouch for) or other (not plain). */
static int read_text(Reader *r, const char *s, Py_ssize_t n, int64_t position) {
    if (buffer_reserve(&r->seps, 4 * (n + 1)) < 0 || buffer_reserve(&r->codes, n + 1) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    uint32_t *seps = (uint32_t *)r->seps.data;
    Py_ssize_t found = find_separators(s, n, seps, r->codes.data);
    if (found < 0) return buffer_add(&r->other, &position, 8) < 0 ? (PyErr_NoMemory(), -1) : 0;
    int count = (int)found;
    int tags = n > MAX_LINE_CHARS ? -1 : line_form(r->codes.data, seps, count);
    if (tags < 0) return buffer_add(&r->strict, &position, 8) < 0 ? (PyErr_NoMemory(), -1) : 0;
    int values = count / 2; /* keys, each with its value; the time after the last separator */
    uint64_t hash = fnv1a(s, seps[0], FNV_OFFSET);
    hash = (hash ^ (uint64_t)tags) * FNV_PRIME;
    for (int j = 0; j < values; j++) hash = (hash ^ (seps[2 * j + 1] - seps[2 * j])) * FNV_PRIME;
    Kind *kind = kinds_find(&r->kinds, s, seps, tags, values, hash, r->field_types);
    if (kind == NULL) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return -1;
    }
    int read = kind->types == NULL ? 0 : read_line(kind, s, n, seps, count, position);
    if (read < 0) return -1;
    if (read == 0 && buffer_add(&r->strict, &position, 8) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* The lines' kinds read (texts[p], lengths[p] long; NULL: a str that is not ASCII). */
static PyObject *decode_texts(const char *const *texts, const Py_ssize_t *lengths,
                              Py_ssize_t count, PyObject *field_types) {
    Reader r = {.field_types = field_types};
    PyObject *found = NULL, *result = NULL;
    for (Py_ssize_t p = 0; p < count; p++) {
        int64_t position = p;
        if (texts[p] == NULL) {
            if (buffer_add(&r.other, &position, 8) < 0) {
                PyErr_NoMemory();
                goto done;
            }
        } else if (read_text(&r, texts[p], lengths[p], position) < 0) {
            goto done;
        }
    }
    found = PyList_New(0);
    if (found == NULL) goto done;
    for (Py_ssize_t k = 0; k < r.kinds.count; k++) {
        const Kind *kind = &r.kinds.kinds[k];
        if (kind->types == NULL || kind->rows.size == 0) continue;
        PyObject *read = kind_result(kind);
        if (read == NULL || PyList_Append(found, read) < 0) {
            Py_XDECREF(read);
            goto done;
        }
        Py_DECREF(read);
    }
    result = Py_BuildValue("(ONN)", found, buffer_bytes(&r.strict), buffer_bytes(&r.other));
done:
    Py_XDECREF(found);
    kinds_free(&r.kinds);
    free(r.strict.data);
    free(r.other.data);
    free(r.seps.data);
    free(r.codes.data);
    return result;
}

static PyObject *decode(PyObject *module, PyObject *args) {
    PyObject *lines, *field_types, *result = NULL;
    if (!PyArg_ParseTuple(args, "O!O:decode", &PyList_Type, &lines, &field_types)) return NULL;
    Py_ssize_t count = PyList_GET_SIZE(lines);
    const char **texts = malloc(sizeof(char *) * (size_t)(count + 1));
    Py_ssize_t *lengths = malloc(sizeof(Py_ssize_t) * (size_t)(count + 1));
    if (texts == NULL || lengths == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t p = 0; p < count; p++) {
        PyObject *line = PyList_GET_ITEM(lines, p);
        if (!PyUnicode_Check(line)) {
            PyErr_SetString(PyExc_TypeError, "decode takes a list of str");
            goto done;
        }
        texts[p] = PyUnicode_IS_ASCII(line) ? (const char *)PyUnicode_DATA(line) : NULL;
        lengths[p] = PyUnicode_GET_LENGTH(line);
    }
    result = decode_texts(texts, lengths, count, field_types);
done:
    free(texts);
    free(lengths);
    return result;
}

/* decode_spans(raws, which, starts, ends, field_types): the same for lines held as spans of
 * buffers (bytes, or views of a file mapped into memory): line p is
 * raws[which[p]][starts[p]:ends[p]] (which int32, the others int64). A line whose bytes are not
 * ASCII is not plain, and so in other. */
static PyObject *decode_spans(PyObject *module, PyObject *args) {
    PyObject *raws, *field_types, *result = NULL;
    Py_buffer which, starts, ends;
    if (!PyArg_ParseTuple(args, "O!y*y*y*O:decode_spans", &PyList_Type, &raws, &which, &starts,
                          &ends, &field_types))
        return NULL;
    Py_ssize_t count = starts.len / 8, held = 0, buffers = PyList_GET_SIZE(raws);
    const char **texts = malloc(sizeof(char *) * (size_t)(count + 1));
    Py_ssize_t *lengths = malloc(sizeof(Py_ssize_t) * (size_t)(count + 1));
    Py_buffer *views = calloc((size_t)buffers + 1, sizeof(Py_buffer));
    const int32_t *raw_of = which.buf;
    const int64_t *start = starts.buf, *end = ends.buf;
    if (texts == NULL || lengths == NULL || views == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (which.len != 4 * count || ends.len != 8 * count) {
        PyErr_SetString(PyExc_ValueError, "decode_spans: which, starts and ends differ in length");
        goto done;
    }
    for (; held < buffers; held++)
        if (PyObject_GetBuffer(PyList_GET_ITEM(raws, held), &views[held], PyBUF_SIMPLE) < 0)
            goto done;
    for (Py_ssize_t p = 0; p < count; p++) {
        if (raw_of[p] < 0 || raw_of[p] >= buffers || start[p] < 0 || start[p] > end[p] ||
            end[p] > views[raw_of[p]].len) {
            PyErr_SetString(PyExc_ValueError, "decode_spans: a span outside its bytes");
            goto done;
        }
        texts[p] = (const char *)views[raw_of[p]].buf + start[p];
        lengths[p] = (Py_ssize_t)(end[p] - start[p]);
    }
    result = decode_texts(texts, lengths, count, field_types);
done:
    for (Py_ssize_t b = 0; b < held; b++) PyBuffer_Release(&views[b]);
    free(views);
    free(texts);
    free(lengths);
    PyBuffer_Release(&which);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&ends);
    return result;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS,
     "decode(lines, field_types) -> (kinds, strict, other): see schemas/plain_lines.c."},
    {"decode_spans", decode_spans, METH_VARARGS,
     "decode_spans(raws, which, starts, ends, field_types) -> as decode."},
    {"line_ends", plain_line_ends, METH_VARARGS,
     "line_ends(raw) -> int64 ends of raw's lines."},
    {"plain_stamps", plain_stamps, METH_VARARGS,
     "plain_stamps(raw, starts, ends) -> int64 stamp of each line, -1 where not plain."},
    {"measured_as", plain_measured_as, METH_VARARGS,
     "measured_as(raw, starts, ends, names, prefixes) -> uint8 per line: a foreign measurement."},
    {"line_heads", plain_line_heads, METH_VARARGS,
     "line_heads(raw, starts, ends) -> (int32 code of each line's head, distinct heads)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "plain_lines",
    "Plain lines of line protocol to value columns (the fast path of schemas/line_decoder.py).",
    -1, methods,
};

PyMODINIT_FUNC PyInit_plain_lines(void) {
    classes_init();
    return PyModule_Create(&module);
}
