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
 * field_types(names, tag_count) is asked once per kind: bytes with one type code per field
 * ("f" float, "i" int, "b" bool), or None when the strict decoder must read the kind's lines.
 *
 * It vouches for exactly the spellings the numpy path vouches for (line_decoder_values.py),
 * with the same values, and sends a row to the strict decoder on anything else, so both
 * paths give the strict decoder's frames (tests/test_line_decoder.py holds both to it):
 *   float  -?[0-9.]* with at most one point and 1 to 14 digits: m / 10**r, both exact
 *          doubles, one correctly rounded division (what float() gives);
 *   int    -?[0-9]{1,18}i;   bool  true | false;   time  [0-9]{1,19}, at most MAX_TIME_NS;
 *   tag    1 to 248 bytes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define SMALLEST_KIND 4                   /* line_decoder_tokens.SMALLEST_KIND */
#define MAX_LINE_CHARS (1 << 20)          /* codec.MAX_LINE_CHARS */
#define MOST_TAG_BYTES 248                /* line_decoder_values: PAD - 8 */
#define MAX_TIME_NS 9223372036854775806ULL /* codec.MAX_TIME_NS: 2**63 - 2 */

static const double POW10[] = {1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                               1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};

/* Bytes that grow: rows, tokens and columns, appended to at the end. */
typedef struct {
    char *data;
    Py_ssize_t size, capacity;
} Buffer;

static int buffer_reserve(Buffer *b, Py_ssize_t more) {
    if (b->size + more <= b->capacity) return 0;
    Py_ssize_t capacity = b->capacity ? b->capacity : 256;
    while (capacity < b->size + more) capacity *= 2;
    char *data = realloc(b->data, (size_t)capacity);
    if (data == NULL) return -1;
    b->data = data;
    b->capacity = capacity;
    return 0;
}

static inline int buffer_add(Buffer *b, const void *value, Py_ssize_t n) {
    if (b->size + n > b->capacity && buffer_reserve(b, n) < 0) return -1;
    memcpy(b->data + b->size, value, (size_t)n);
    b->size += n;
    return 0;
}

static PyObject *buffer_bytes(const Buffer *b) {
    return PyByteArray_FromStringAndSize(b->data ? b->data : "", b->size);
}

/* A kind: its measurement and keys, and per row where each value token stands in its line.
 * Lines are m(,k=v)* k=v(,k=v)* t, so key j stands between separators 2j and 2j + 1 and its
 * value between 2j + 1 and 2j + 2: the counts of tags and fields and the keys are the kind. */
typedef struct {
    uint64_t hash; /* of the measurement, the counts and each key's length: checked by keys */
    int tags, fields;
    char *keys;        /* the measurement, then each key, one after another */
    uint32_t *key_ends; /* where each of those ends in keys */
    Buffer rows;       /* int64 line positions */
    Buffer tokens;     /* uint32 (start, end) per value (tags, fields, time) per row */
} Kind;

typedef struct {
    Kind *kinds;
    Py_ssize_t count, capacity;
    Py_ssize_t *table; /* open addressing by hash: an index into kinds, or -1 */
    Py_ssize_t table_size;
} Kinds;

static uint64_t fnv1a(const char *s, Py_ssize_t n, uint64_t h) {
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h;
}

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

/* The line's kind, made if new; NULL when out of memory. */
static Kind *kinds_find(Kinds *k, const char *s, const uint32_t *seps, int tags, int values,
                        uint64_t hash) {
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
    kind->keys = malloc((size_t)seps[2 * values - 1] + 1);
    kind->key_ends = malloc(sizeof(uint32_t) * (size_t)(values + 1));
    if (kind->keys == NULL || kind->key_ends == NULL) {
        free(kind->keys);
        free(kind->key_ends);
        return NULL;
    }
    memcpy(kind->keys, s, seps[0]);
    kind->key_ends[0] = seps[0];
    for (int j = 0; j < values; j++) {
        uint32_t length = seps[2 * j + 1] - seps[2 * j] - 1;
        memcpy(kind->keys + kind->key_ends[j], s + seps[2 * j] + 1, length);
        kind->key_ends[j + 1] = kind->key_ends[j] + length;
    }
    kind->hash = hash;
    kind->tags = tags;
    kind->fields = values - tags;
    k->table[at] = k->count++;
    return kind;
}

static void kinds_free(Kinds *k) {
    for (Py_ssize_t i = 0; i < k->count; i++) {
        free(k->kinds[i].keys);
        free(k->kinds[i].key_ends);
        free(k->kinds[i].rows.data);
        free(k->kinds[i].tokens.data);
    }
    free(k->kinds);
    free(k->table);
}

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
    uint64_t *hashes;
    const char **spelt;
    Py_ssize_t *lengths;
    Py_ssize_t size, count;
    PyObject *values; /* list of str, by code */
} Interned;

static int interned_init(Interned *t, Py_ssize_t rows) {
    Py_ssize_t size = 16;
    while (size < 2 * rows) size *= 2;
    t->size = size;
    t->count = 0;
    t->slots = malloc(sizeof(Py_ssize_t) * (size_t)size);
    t->hashes = malloc(sizeof(uint64_t) * (size_t)(rows + 1));
    t->spelt = malloc(sizeof(char *) * (size_t)(rows + 1));
    t->lengths = malloc(sizeof(Py_ssize_t) * (size_t)(rows + 1));
    t->values = PyList_New(0);
    if (!t->slots || !t->hashes || !t->spelt || !t->lengths || !t->values) return -1;
    for (Py_ssize_t i = 0; i < size; i++) t->slots[i] = -1;
    return 0;
}

static void interned_free(Interned *t) {
    free(t->slots);
    free(t->hashes);
    free(t->spelt);
    free(t->lengths);
    Py_XDECREF(t->values);
}

static Py_ssize_t interned_code(Interned *t, const char *s, Py_ssize_t n) {
    uint64_t hash = fnv1a(s, n, 14695981039346656037ULL);
    Py_ssize_t at = (Py_ssize_t)(hash & (uint64_t)(t->size - 1));
    while (t->slots[at] >= 0) {
        Py_ssize_t code = t->slots[at];
        if (t->hashes[code] == hash && t->lengths[code] == n && memcmp(t->spelt[code], s, n) == 0)
            return code;
        at = (at + 1) & (t->size - 1);
    }
    PyObject *value = PyUnicode_FromStringAndSize(s, n);
    if (value == NULL || PyList_Append(t->values, value) < 0) {
        Py_XDECREF(value);
        return -1;
    }
    Py_DECREF(value);
    Py_ssize_t code = t->count++;
    t->hashes[code] = hash;
    t->spelt[code] = s;
    t->lengths[code] = n;
    t->slots[at] = code;
    return code;
}

/* The names of a kind: its measurement, then its keys. */
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

/* Whether two rows share every tag (by code) and their stamp: a line that repeats another, which
 * the replay must count and drop. */
static int repeats_a_row(const Buffer *codes, int tags, const int64_t *times, Py_ssize_t rows) {
    Py_ssize_t size = 16;
    while (size < 2 * rows) size *= 2;
    Py_ssize_t *slots = malloc(sizeof(Py_ssize_t) * (size_t)size);
    if (slots == NULL) return -1;
    for (Py_ssize_t i = 0; i < size; i++) slots[i] = -1;
    int found = 0;
    for (Py_ssize_t r = 0; r < rows && !found; r++) {
        uint64_t hash = (uint64_t)times[r] * 0x9E3779B97F4A7C15ULL;
        for (int j = 0; j < tags; j++)
            hash = (hash ^ (uint64_t)((const int32_t *)codes[j].data)[r]) * 1099511628211ULL;
        Py_ssize_t at = (Py_ssize_t)((hash ^ (hash >> 29)) & (uint64_t)(size - 1));
        for (; slots[at] >= 0; at = (at + 1) & (size - 1)) {
            Py_ssize_t other = slots[at];
            int same = times[other] == times[r];
            for (int j = 0; same && j < tags; j++)
                same = ((const int32_t *)codes[j].data)[other] == ((const int32_t *)codes[j].data)[r];
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

/* Reads a kind's rows: the columns of those it vouches for, the others added to strict. */
static PyObject *read_kind(const Kind *kind, const char *const *texts, const char *types,
                           PyObject *names, Buffer *strict) {
    Py_ssize_t rows = kind->rows.size / (Py_ssize_t)sizeof(int64_t);
    int tags = kind->tags, fields = kind->fields, width = tags + fields + 1;
    const int64_t *positions = (const int64_t *)kind->rows.data;
    const uint32_t *tokens = (const uint32_t *)kind->tokens.data;
    Buffer good = {0}, times = {0};
    Buffer *codes = calloc((size_t)(tags + 1), sizeof(Buffer));
    Buffer *columns = calloc((size_t)(fields + 1), sizeof(Buffer));
    Interned *interned = calloc((size_t)(tags + 1), sizeof(Interned));
    unsigned char *row_values = malloc((size_t)(8 * (fields + 1)));
    int32_t *row_codes = malloc(sizeof(int32_t) * (size_t)(tags + 1));
    PyObject *result = NULL, *tag_list = NULL, *field_list = NULL;
    if (!codes || !columns || !interned || !row_values || !row_codes) goto nomemory;
    for (int j = 0; j < tags; j++)
        if (interned_init(&interned[j], rows) < 0 || buffer_reserve(&codes[j], 4 * rows) < 0)
            goto nomemory;
    for (int j = 0; j < fields; j++)
        if (buffer_reserve(&columns[j], (types[j] == 'b' ? 1 : 8) * rows) < 0) goto nomemory;
    if (buffer_reserve(&good, 8 * rows) < 0 || buffer_reserve(&times, 8 * rows) < 0)
        goto nomemory;
    for (Py_ssize_t r = 0; r < rows; r++) {
        const char *line = texts[positions[r]];
        const uint32_t *at = tokens + 2 * (Py_ssize_t)width * r;
        int ok = 1;
        int64_t time = 0;
        for (int j = 0; ok && j < fields; j++) {
            const char *s = line + at[2 * (tags + j)];
            Py_ssize_t n = (Py_ssize_t)at[2 * (tags + j) + 1] - at[2 * (tags + j)];
            unsigned char *value = row_values + 8 * j;
            if (types[j] == 'f') ok = read_float(s, n, (double *)value);
            else if (types[j] == 'i') ok = read_int(s, n, (int64_t *)value);
            else ok = read_bool(s, n, value);
        }
        if (ok) {
            const uint32_t *t = at + 2 * (tags + fields);
            ok = read_time(line + t[0], (Py_ssize_t)t[1] - t[0], &time);
        }
        for (int j = 0; ok && j < tags; j++) {
            Py_ssize_t n = (Py_ssize_t)at[2 * j + 1] - at[2 * j];
            if (n < 1 || n > MOST_TAG_BYTES) {
                ok = 0;
                break;
            }
            Py_ssize_t code = interned_code(&interned[j], line + at[2 * j], n);
            if (code < 0) goto done;
            row_codes[j] = (int32_t)code;
        }
        if (!ok) {
            if (buffer_add(strict, &positions[r], 8) < 0) goto nomemory;
            continue;
        }
        /* Room was reserved for every row. */
        buffer_add(&good, &positions[r], 8);
        buffer_add(&times, &time, 8);
        for (int j = 0; j < tags; j++) buffer_add(&codes[j], &row_codes[j], 4);
        for (int j = 0; j < fields; j++)
            buffer_add(&columns[j], row_values + 8 * j, types[j] == 'b' ? 1 : 8);
    }
    if (good.size == 0) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    tag_list = PyList_New(tags);
    field_list = PyList_New(fields);
    if (!tag_list || !field_list) goto done;
    for (int j = 0; j < tags; j++) {
        PyObject *pair = Py_BuildValue("(NO)", buffer_bytes(&codes[j]), interned[j].values);
        if (pair == NULL) goto done;
        PyList_SET_ITEM(tag_list, j, pair);
    }
    for (int j = 0; j < fields; j++) {
        PyObject *column = buffer_bytes(&columns[j]);
        if (column == NULL) goto done;
        PyList_SET_ITEM(field_list, j, column);
    }
    int repeats = repeats_a_row(codes, tags, (const int64_t *)times.data, good.size / 8);
    if (repeats < 0) goto nomemory;
    result = Py_BuildValue("(OiNNOOO)", names, tags, buffer_bytes(&good), buffer_bytes(&times),
                           tag_list, field_list, repeats ? Py_True : Py_False);
    goto done;
nomemory:
    PyErr_NoMemory();
done:
    Py_XDECREF(tag_list);
    Py_XDECREF(field_list);
    free(good.data);
    free(times.data);
    for (int j = 0; codes && j < tags; j++) free(codes[j].data);
    for (int j = 0; columns && j < fields; j++) free(columns[j].data);
    for (int j = 0; interned && j < tags; j++) interned_free(&interned[j]);
    free(codes);
    free(columns);
    free(interned);
    free(row_values);
    free(row_codes);
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

/* Files a line in its kind, its position in strict (plain but not of the form, or too long)
 * or in other (not plain). */
static int file_line(Kinds *kinds, Buffer *strict, Buffer *other, Buffer *seps_buffer,
                     Buffer *codes_buffer, const char *s, Py_ssize_t n, int64_t position) {
    if (buffer_reserve(seps_buffer, 4 * (n + 1)) < 0 || buffer_reserve(codes_buffer, n + 1) < 0)
        return -1;
    uint32_t *seps = (uint32_t *)seps_buffer->data;
    char *codes = codes_buffer->data;
    Py_ssize_t found = find_separators(s, n, seps, codes);
    if (found < 0) return buffer_add(other, &position, 8);
    if (n > MAX_LINE_CHARS) return buffer_add(strict, &position, 8);
    int count = (int)found;
    int tags = line_form(codes, seps, count);
    if (tags < 0) return buffer_add(strict, &position, 8);
    int values = count / 2; /* keys, each with its value; the time after the last separator */
    uint64_t hash = fnv1a(s, seps[0], 14695981039346656037ULL);
    hash = (hash ^ (uint64_t)tags) * 1099511628211ULL;
    for (int j = 0; j < values; j++)
        hash = (hash ^ (seps[2 * j + 1] - seps[2 * j])) * 1099511628211ULL;
    Kind *kind = kinds_find(kinds, s, seps, tags, values, hash);
    if (kind == NULL || buffer_add(&kind->rows, &position, 8) < 0 ||
        buffer_reserve(&kind->tokens, 8 * (values + 1)) < 0)
        return -1;
    uint32_t *token = (uint32_t *)(kind->tokens.data + kind->tokens.size);
    for (int j = 0; j < values; j++) {
        token[2 * j] = seps[2 * j + 1] + 1;
        token[2 * j + 1] = seps[2 * j + 2];
    }
    token[2 * values] = seps[count - 1] + 1;
    token[2 * values + 1] = (uint32_t)n;
    kind->tokens.size += 8 * (values + 1);
    return 0;
}

/* plain_stamps(raw, starts, ends): each line's stamp where it is plain, else -1 (as
 * line_file.PieceLines.plain_stamps reads it): 1 to 19 ASCII digits that end the line, after
 * a space or at the line's start, below 2**63, in a line that does not start with "#". */
static PyObject *plain_stamps(PyObject *module, PyObject *args) {
    Py_buffer raw, starts, ends;
    if (!PyArg_ParseTuple(args, "y*y*y*:plain_stamps", &raw, &starts, &ends)) return NULL;
    Py_ssize_t count = starts.len / 8;
    const unsigned char *data = raw.buf;
    const int64_t *start = starts.buf, *end = ends.buf;
    PyObject *result = NULL;
    if (ends.len != starts.len) {
        PyErr_SetString(PyExc_ValueError, "plain_stamps: starts and ends differ in length");
        goto done;
    }
    result = PyByteArray_FromStringAndSize(NULL, 8 * count);
    if (result == NULL) goto done;
    int64_t *stamps = (int64_t *)PyByteArray_AS_STRING(result);
    for (Py_ssize_t p = 0; p < count; p++) {
        int64_t first = start[p], at = end[p];
        stamps[p] = -1;
        if (first < 0 || first > at || at > raw.len) {
            Py_CLEAR(result);
            PyErr_SetString(PyExc_ValueError, "plain_stamps: a line outside the bytes");
            goto done;
        }
        uint64_t value = 0, scale = 1;
        int digits = 0;
        while (at > first && data[at - 1] >= '0' && data[at - 1] <= '9' && digits < 20) {
            at--;
            if (digits < 19) value += (uint64_t)(data[at] - '0') * scale;
            scale *= 10;
            digits++;
        }
        if (digits == 0 || digits > 19 || (at > first && data[at - 1] != ' ')) continue;
        if (data[first] == '#' || value >= (1ULL << 63)) continue;
        stamps[p] = (int64_t)value;
    }
done:
    PyBuffer_Release(&raw);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&ends);
    return result;
}

/* line_heads(raw, starts, ends) -> (codes, heads): each line's head (its bytes up to and
 * with its first space; the whole line if it has none) as an int32 code into heads, a list of
 * the distinct heads as bytes in order of first sight. A capture repeats its series' heads
 * window after window, so a reader of heads (a node tag, a measurement) reads each once. */
static PyObject *line_heads(PyObject *module, PyObject *args) {
    Py_buffer raw, starts, ends;
    if (!PyArg_ParseTuple(args, "y*y*y*:line_heads", &raw, &starts, &ends)) return NULL;
    Py_ssize_t count = starts.len / 8;
    const char *data = raw.buf;
    const int64_t *start = starts.buf, *end = ends.buf;
    PyObject *result = NULL, *codes = NULL, *heads = NULL;
    Py_ssize_t size = 64, distinct = 0;
    Py_ssize_t *slots = NULL;
    uint64_t *hashes = NULL;
    const char **spelt = NULL;
    Py_ssize_t *lengths = NULL;
    if (ends.len != starts.len) {
        PyErr_SetString(PyExc_ValueError, "line_heads: starts and ends differ in length");
        goto done;
    }
    while (size < 2 * count) size *= 2;
    slots = malloc(sizeof(Py_ssize_t) * (size_t)size);
    hashes = malloc(sizeof(uint64_t) * (size_t)(count + 1));
    spelt = malloc(sizeof(char *) * (size_t)(count + 1));
    lengths = malloc(sizeof(Py_ssize_t) * (size_t)(count + 1));
    codes = PyByteArray_FromStringAndSize(NULL, 4 * count);
    heads = PyList_New(0);
    if (!slots || !hashes || !spelt || !lengths) {
        PyErr_NoMemory();
        goto done;
    }
    if (!codes || !heads) goto done;
    for (Py_ssize_t i = 0; i < size; i++) slots[i] = -1;
    int32_t *code_of = (int32_t *)PyByteArray_AS_STRING(codes);
    for (Py_ssize_t p = 0; p < count; p++) {
        if (start[p] < 0 || start[p] > end[p] || end[p] > raw.len) {
            PyErr_SetString(PyExc_ValueError, "line_heads: a line outside the bytes");
            goto done;
        }
        const char *s = data + start[p];
        Py_ssize_t n = (Py_ssize_t)(end[p] - start[p]);
        const char *space = memchr(s, ' ', (size_t)n);
        if (space != NULL) n = space - s + 1;
        uint64_t hash = fnv1a(s, n, 14695981039346656037ULL);
        Py_ssize_t at = (Py_ssize_t)(hash & (uint64_t)(size - 1)), code = -1;
        for (; slots[at] >= 0; at = (at + 1) & (size - 1)) {
            Py_ssize_t other = slots[at];
            if (hashes[other] == hash && lengths[other] == n && memcmp(spelt[other], s, n) == 0) {
                code = other;
                break;
            }
        }
        if (code < 0) {
            PyObject *head = PyBytes_FromStringAndSize(s, n);
            if (head == NULL || PyList_Append(heads, head) < 0) {
                Py_XDECREF(head);
                goto done;
            }
            Py_DECREF(head);
            code = distinct++;
            hashes[code] = hash;
            spelt[code] = s;
            lengths[code] = n;
            slots[at] = code;
        }
        code_of[p] = (int32_t)code;
    }
    result = PyTuple_Pack(2, codes, heads);
done:
    Py_XDECREF(codes);
    Py_XDECREF(heads);
    free(slots);
    free(hashes);
    free(spelt);
    free(lengths);
    PyBuffer_Release(&raw);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&ends);
    return result;
}

/* The lines' kinds read (texts[p], lengths[p] long; NULL: a str that is not ASCII). */
static PyObject *decode_texts(const char *const *texts, const Py_ssize_t *lengths,
                              Py_ssize_t count, PyObject *field_types) {
    Kinds kinds = {0};
    Buffer strict = {0}, other = {0}, seps = {0}, codes = {0};
    PyObject *found = NULL, *result = NULL;
    for (Py_ssize_t p = 0; p < count; p++) {
        int64_t position = p;
        if (texts[p] == NULL) {
            if (buffer_add(&other, &position, 8) < 0) goto nomemory;
            continue;
        }
        if (file_line(&kinds, &strict, &other, &seps, &codes, texts[p], lengths[p], position) < 0)
            goto nomemory;
    }
    found = PyList_New(0);
    if (found == NULL) goto done;
    for (Py_ssize_t k = 0; k < kinds.count; k++) {
        const Kind *kind = &kinds.kinds[k];
        PyObject *types = NULL, *names = NULL, *read = NULL;
        if (kind->rows.size >= SMALLEST_KIND * (Py_ssize_t)sizeof(int64_t)) {
            names = kind_names(kind);
            if (names == NULL) goto done;
            types = PyObject_CallFunction(field_types, "Oi", names, kind->tags);
            if (types == NULL) {
                Py_DECREF(names);
                goto done;
            }
        }
        if (types != NULL && PyBytes_Check(types) && PyBytes_GET_SIZE(types) == kind->fields) {
            read = read_kind(kind, texts, PyBytes_AS_STRING(types), names, &strict);
            if (read == NULL || (read != Py_None && PyList_Append(found, read) < 0)) {
                Py_XDECREF(read);
                Py_DECREF(types);
                Py_DECREF(names);
                goto done;
            }
            Py_DECREF(read);
        } else if (buffer_add(&strict, kind->rows.data, kind->rows.size) < 0) {
            Py_XDECREF(types);
            Py_XDECREF(names);
            goto nomemory;
        }
        Py_XDECREF(types);
        Py_XDECREF(names);
    }
    result = Py_BuildValue("(ONN)", found, buffer_bytes(&strict), buffer_bytes(&other));
    goto done;
nomemory:
    PyErr_NoMemory();
done:
    Py_XDECREF(found);
    kinds_free(&kinds);
    free(strict.data);
    free(other.data);
    free(seps.data);
    free(codes.data);
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
 * bytes objects: line p is raws[which[p]][starts[p]:ends[p]] (which int32, the others
 * int64). A line whose bytes are not ASCII is not plain, and so in other. */
static PyObject *decode_spans(PyObject *module, PyObject *args) {
    PyObject *raws, *field_types, *result = NULL;
    Py_buffer which, starts, ends;
    if (!PyArg_ParseTuple(args, "O!y*y*y*O:decode_spans", &PyList_Type, &raws, &which, &starts,
                          &ends, &field_types))
        return NULL;
    Py_ssize_t count = starts.len / 8;
    const char **texts = malloc(sizeof(char *) * (size_t)(count + 1));
    Py_ssize_t *lengths = malloc(sizeof(Py_ssize_t) * (size_t)(count + 1));
    const int32_t *raw_of = which.buf;
    const int64_t *start = starts.buf, *end = ends.buf;
    if (texts == NULL || lengths == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (which.len != 4 * count || ends.len != 8 * count) {
        PyErr_SetString(PyExc_ValueError, "decode_spans: which, starts and ends differ in length");
        goto done;
    }
    for (Py_ssize_t p = 0; p < count; p++) {
        PyObject *raw = raw_of[p] >= 0 && raw_of[p] < PyList_GET_SIZE(raws)
                            ? PyList_GET_ITEM(raws, raw_of[p]) : NULL;
        if (raw == NULL || !PyBytes_Check(raw) || start[p] < 0 || start[p] > end[p] ||
            end[p] > PyBytes_GET_SIZE(raw)) {
            PyErr_SetString(PyExc_ValueError, "decode_spans: a span outside its bytes");
            goto done;
        }
        texts[p] = PyBytes_AS_STRING(raw) + start[p];
        lengths[p] = (Py_ssize_t)(end[p] - start[p]);
    }
    result = decode_texts(texts, lengths, count, field_types);
done:
    free(texts);
    free(lengths);
    PyBuffer_Release(&which);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&ends);
    return result;
}

/* line_ends(raw): where each "\n" of raw stands, then len(raw): the ends of its lines. */
static PyObject *line_ends(PyObject *module, PyObject *args) {
    Py_buffer raw;
    if (!PyArg_ParseTuple(args, "y*:line_ends", &raw)) return NULL;
    Buffer ends = {0};
    const char *data = raw.buf, *at = data, *stop = data + raw.len;
    int64_t position;
    PyObject *result = NULL;
    while ((at = memchr(at, '\n', (size_t)(stop - at))) != NULL) {
        position = at - data;
        if (buffer_add(&ends, &position, 8) < 0) goto nomemory;
        at++;
    }
    position = raw.len;
    if (buffer_add(&ends, &position, 8) < 0) goto nomemory;
    result = buffer_bytes(&ends);
    goto done;
nomemory:
    PyErr_NoMemory();
done:
    free(ends.data);
    PyBuffer_Release(&raw);
    return result;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS,
     "decode(lines, field_types) -> (kinds, strict, other): see schemas/plain_lines.c."},
    {"decode_spans", decode_spans, METH_VARARGS,
     "decode_spans(raws, which, starts, ends, field_types) -> as decode."},
    {"line_ends", line_ends, METH_VARARGS, "line_ends(raw) -> int64 ends of raw's lines."},
    {"line_heads", line_heads, METH_VARARGS,
     "line_heads(raw, starts, ends) -> (int32 code of each line's head, distinct heads)."},
    {"plain_stamps", plain_stamps, METH_VARARGS,
     "plain_stamps(raw, starts, ends) -> int64 stamp of each line, -1 where not plain."},
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
