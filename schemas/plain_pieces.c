/* Reads of a replayed piece's lines, over its bytes (schemas/line_file.py: PieceText,
 * PieceLines): where its lines end, each line's plain stamp, each line's head, which lines are
 * of a foreign measurement. */
#include "plain_common.h"

/* Whether starts and ends (int64) are of one length and every line [start, end) lies within
 * raw; else a ValueError naming the function, and 0. */
static int lines_inside(const Py_buffer *raw, const Py_buffer *starts, const Py_buffer *ends,
                        const char *function) {
    const int64_t *start = starts->buf, *end = ends->buf;
    if (ends->len != starts->len) {
        PyErr_Format(PyExc_ValueError, "%s: starts and ends differ in length", function);
        return 0;
    }
    for (Py_ssize_t p = 0; p < starts->len / 8; p++)
        if (start[p] < 0 || start[p] > end[p] || end[p] > raw->len) {
            PyErr_Format(PyExc_ValueError, "%s: a line outside the bytes", function);
            return 0;
        }
    return 1;
}

/* line_ends(raw): where each "\n" of raw stands, then len(raw): the ends of its lines. */
PyObject *plain_line_ends(PyObject *module, PyObject *args) {
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


/* plain_stamps(raw, starts, ends): each line's stamp where it is plain, else -1 (as
 * line_file.PieceLines.plain_stamps reads it): 1 to 19 ASCII digits that end the line, after
 * a space or at the line's start, below 2**63, in a line that does not start with "#". */
PyObject *plain_stamps(PyObject *module, PyObject *args) {
    Py_buffer raw, starts, ends;
    if (!PyArg_ParseTuple(args, "y*y*y*:plain_stamps", &raw, &starts, &ends)) return NULL;
    Py_ssize_t count = starts.len / 8;
    const unsigned char *data = raw.buf;
    const int64_t *start = starts.buf, *end = ends.buf;
    PyObject *result = NULL;
    if (!lines_inside(&raw, &starts, &ends, "plain_stamps")) goto done;
    result = PyByteArray_FromStringAndSize(NULL, 8 * count);
    if (result == NULL) goto done;
    int64_t *stamps = (int64_t *)PyByteArray_AS_STRING(result);
    for (Py_ssize_t p = 0; p < count; p++) {
        int64_t first = start[p], at = end[p];
        stamps[p] = -1;
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
PyObject *plain_line_heads(PyObject *module, PyObject *args) {
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
    if (!lines_inside(&raw, &starts, &ends, "line_heads")) goto done;
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
        const char *s = data + start[p];
        Py_ssize_t n = (Py_ssize_t)(end[p] - start[p]);
        const char *space = memchr(s, ' ', (size_t)n);
        if (space != NULL) n = space - s + 1;
        uint64_t hash = fnv1a(s, n, FNV_OFFSET);
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


/* measured_as(raw, starts, ends, names, prefixes): per line, 1 where its measurement (its bytes
 * up to the first comma or space) is one of names or starts with one of prefixes (tuples of
 * bytes: ASCII, so that a line's bytes match them where its text does). */
PyObject *plain_measured_as(PyObject *module, PyObject *args) {
    Py_buffer raw, starts, ends;
    PyObject *names, *prefixes, *result = NULL;
    if (!PyArg_ParseTuple(args, "y*y*y*O!O!:measured_as", &raw, &starts, &ends, &PyTuple_Type,
                          &names, &PyTuple_Type, &prefixes))
        return NULL;
    Py_ssize_t count = starts.len / 8, n_names = PyTuple_GET_SIZE(names),
               n_prefixes = PyTuple_GET_SIZE(prefixes);
    const char *data = raw.buf;
    const int64_t *start = starts.buf, *end = ends.buf;
    for (Py_ssize_t j = 0; j < n_names; j++)
        if (!PyBytes_Check(PyTuple_GET_ITEM(names, j))) goto not_bytes;
    for (Py_ssize_t j = 0; j < n_prefixes; j++)
        if (!PyBytes_Check(PyTuple_GET_ITEM(prefixes, j))) goto not_bytes;
    if (!lines_inside(&raw, &starts, &ends, "measured_as")) goto done;
    result = PyByteArray_FromStringAndSize(NULL, count);
    if (result == NULL) goto done;
    char *found = PyByteArray_AS_STRING(result);
    for (Py_ssize_t p = 0; p < count; p++) {
        const char *s = data + start[p];
        Py_ssize_t n = (Py_ssize_t)(end[p] - start[p]), m = 0;
        while (m < n && s[m] != ',' && s[m] != ' ') m++;
        int match = 0;
        for (Py_ssize_t j = 0; !match && j < n_names; j++) {
            PyObject *name = PyTuple_GET_ITEM(names, j);
            match = PyBytes_GET_SIZE(name) == m && memcmp(PyBytes_AS_STRING(name), s, m) == 0;
        }
        for (Py_ssize_t j = 0; !match && j < n_prefixes; j++) {
            PyObject *prefix = PyTuple_GET_ITEM(prefixes, j);
            Py_ssize_t size = PyBytes_GET_SIZE(prefix);
            match = size <= m && memcmp(PyBytes_AS_STRING(prefix), s, size) == 0;
        }
        found[p] = (char)match;
    }
    goto done;
not_bytes:
    PyErr_SetString(PyExc_TypeError, "measured_as: names and prefixes are tuples of bytes");
done:
    PyBuffer_Release(&raw);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&ends);
    return result;
}
