/* json.c - a small JSON reader (see json.h).
 *
 * A recursive-descent parser over the whole text. The arena is a list of
 * malloc'ed chunks, each at least 64 KiB: nodes and decoded strings are
 * carved from the newest one, and json_free walks the list once. This file
 * is used by the command only, never inside a traced process, so malloc is
 * fine here.
 *
 * `cumemtrace merge` reads thousands of reports through it, so the common
 * case is the fast one: a string without escapes is found by one scan and
 * copied whole, an integer is read as it is scanned (strtod only for the
 * others), a small object's names are compared pairwise, not sorted, and a
 * member left out is passed over by a scan that stops only at quotes and
 * brackets. Each fast path ends where the careful one would begin, and that
 * one says what is wrong, as before. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

#define CHUNK_BYTES (64 * 1024)

struct json_chunk {
    struct json_chunk *next;
    size_t used, size;
    /* the chunk's memory follows, aligned as max_align_t */
};

struct parser {
    const char *text, *at, *end;
    struct json_document *doc;
    char *error;
    size_t error_size;
    int failed;
    const char *const *skip; /* the root's members left out; NULL: none */
};

static size_t chunk_header(void)
{
    size_t align = _Alignof(max_align_t);
    return (sizeof(struct json_chunk) + align - 1) / align * align;
}

/* `bytes` of the arena, not zeroed; NULL when out of memory. One larger
 * than a chunk has a chunk of its own, linked behind the newest, whose
 * room stays in use. */
static void *arena_alloc(struct json_document *doc, size_t bytes)
{
    size_t align = _Alignof(max_align_t);
    if (bytes > SIZE_MAX - chunk_header() - align)
        return NULL;
    bytes = (bytes + align - 1) / align * align;
    struct json_chunk *c = doc->chunks;
    if (!c || c->size - c->used < bytes) {
        size_t size = bytes > CHUNK_BYTES ? bytes : CHUNK_BYTES;
        struct json_chunk *fresh = malloc(chunk_header() + size);
        if (!fresh)
            return NULL;
        fresh->used = 0;
        fresh->size = size;
        if (c && size > CHUNK_BYTES) {
            fresh->next = c->next;
            c->next = fresh;
        } else {
            fresh->next = c;
            doc->chunks = fresh;
        }
        c = fresh;
    }
    void *p = (char *)c + chunk_header() + c->used;
    c->used += bytes;
    return p;
}

void *json_alloc(struct json_document *doc, size_t bytes)
{
    return arena_alloc(doc, bytes);
}

void json_free(struct json_document *doc)
{
    struct json_chunk *c = doc->chunks;
    while (c) {
        struct json_chunk *next = c->next;
        free(c);
        c = next;
    }
    doc->chunks = NULL;
    doc->root = NULL;
}

/* Record the first error only, with the line and column where it was seen. */
static void fail(struct parser *p, const char *format, ...)
{
    if (p->failed)
        return;
    p->failed = 1;
    int line = 1, column = 1;
    for (const char *c = p->text; c < p->at && c < p->end; c++) {
        if (*c == '\n') {
            line++;
            column = 1;
        } else {
            column++;
        }
    }
    int n = snprintf(p->error, p->error_size, "line %d, column %d: ", line, column);
    if (n < 0 || (size_t)n >= p->error_size)
        return;
    va_list args;
    va_start(args, format);
    vsnprintf(p->error + n, p->error_size - (size_t)n, format, args);
    va_end(args);
}

static void skip_space(struct parser *p)
{
    while (p->at < p->end && (*p->at == ' ' || *p->at == '\t' || *p->at == '\n' || *p->at == '\r'))
        p->at++;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Four hex digits after "\u"; -1 if they are not. */
static long read_hex4(struct parser *p)
{
    if (p->end - p->at < 4) {
        fail(p, "\\u needs four hex digits");
        return -1;
    }
    long value = 0;
    for (int i = 0; i < 4; i++) {
        int digit = hex_value(p->at[i]);
        if (digit < 0) {
            fail(p, "\\u needs four hex digits");
            return -1;
        }
        value = value * 16 + digit;
    }
    p->at += 4;
    return value;
}

static size_t put_utf8(char *out, unsigned long code)
{
    if (code < 0x80) {
        out[0] = (char)code;
        return 1;
    }
    if (code < 0x800) {
        out[0] = (char)(0xc0 | (code >> 6));
        out[1] = (char)(0x80 | (code & 0x3f));
        return 2;
    }
    if (code < 0x10000) {
        out[0] = (char)(0xe0 | (code >> 12));
        out[1] = (char)(0x80 | ((code >> 6) & 0x3f));
        out[2] = (char)(0x80 | (code & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (code >> 18));
    out[1] = (char)(0x80 | ((code >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((code >> 6) & 0x3f));
    out[3] = (char)(0x80 | (code & 0x3f));
    return 4;
}

/* The bytes that end a string's plain run: a control byte (an error), a
 * backslash, its closing quote. */
/* clang-format off */
static const unsigned char string_stops[256] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x00-0x0f */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x10-0x1f */
    ['"'] = 1, ['\\'] = 1};
/* clang-format on */

/* A string at p->at (on its opening quote), decoded into the arena. One
 * with neither escapes nor control bytes is copied as it is; otherwise, as
 * the decoded text is never longer than the escaped one, one allocation of
 * the raw length is enough. */
static const char *parse_string(struct parser *p, size_t *length)
{
    p->at++;
    const char *plain = p->at;
    while (plain < p->end && !string_stops[(unsigned char)*plain])
        plain++;
    if (plain < p->end && *plain == '"') { /* no escape: copied as it is */
        size_t n = (size_t)(plain - p->at);
        char *out = arena_alloc(p->doc, n + 1);
        if (!out) {
            fail(p, "out of memory");
            return NULL;
        }
        memcpy(out, p->at, n);
        out[n] = '\0';
        *length = n;
        p->at = plain + 1;
        return out;
    }
    const char *close = p->at;
    while (close < p->end && *close != '"') {
        if (*close == '\\' && close + 1 < p->end)
            close++;
        close++;
    }
    if (close >= p->end) {
        fail(p, "unterminated string");
        return NULL;
    }
    char *out = arena_alloc(p->doc, (size_t)(close - p->at) + 1);
    if (!out) {
        fail(p, "out of memory");
        return NULL;
    }
    size_t n = 0;
    while (p->at < close) {
        unsigned char c = (unsigned char)*p->at;
        if (c < 0x20) {
            fail(p, "control character in a string (must be escaped)");
            return NULL;
        }
        if (c != '\\') {
            out[n++] = (char)c;
            p->at++;
            continue;
        }
        p->at++;
        char e = *p->at++;
        switch (e) {
        case '"': out[n++] = '"'; break;
        case '\\': out[n++] = '\\'; break;
        case '/': out[n++] = '/'; break;
        case 'b': out[n++] = '\b'; break;
        case 'f': out[n++] = '\f'; break;
        case 'n': out[n++] = '\n'; break;
        case 'r': out[n++] = '\r'; break;
        case 't': out[n++] = '\t'; break;
        case 'u': {
            long code = read_hex4(p);
            if (code < 0)
                return NULL;
            if (code >= 0xdc00 && code <= 0xdfff) {
                fail(p, "a low surrogate \\u%04lx without a high one before it", code);
                return NULL;
            }
            if (code >= 0xd800 && code <= 0xdbff) {
                if (close - p->at < 6 || p->at[0] != '\\' || p->at[1] != 'u') {
                    fail(p, "a high surrogate \\u%04lx without a low one after it", code);
                    return NULL;
                }
                p->at += 2;
                long low = read_hex4(p);
                if (low < 0)
                    return NULL;
                if (low < 0xdc00 || low > 0xdfff) {
                    fail(p, "a high surrogate \\u%04lx without a low one after it", code);
                    return NULL;
                }
                code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
            }
            n += put_utf8(out + n, (unsigned long)code);
            break;
        }
        default:
            p->at--;
            fail(p, "unknown escape '\\%c' in a string", e);
            return NULL;
        }
    }
    p->at = close + 1;
    out[n] = '\0';
    *length = n;
    return out;
}

/* A number at p->at. An integer without sign, fraction or exponent is
 * added up as its digits are scanned; its double is then the conversion of
 * that (rounded as strtod would); strtod reads the others. */
static int parse_number(struct parser *p, struct json_value *v)
{
    const char *start = p->at;
    int plain = 1; /* no sign, fraction or exponent */
    if (p->at < p->end && *p->at == '-') {
        plain = 0;
        p->at++;
    }
    if (p->at >= p->end || !is_digit(*p->at)) {
        fail(p, "a number needs a digit here");
        return -1;
    }
    if (*p->at == '0' && p->at + 1 < p->end && is_digit(p->at[1])) {
        fail(p, "a number cannot start with 0");
        return -1;
    }
    uint64_t value = 0;
    int fits = 1;
    for (; p->at < p->end && is_digit(*p->at); p->at++) {
        uint64_t digit = (uint64_t)(*p->at - '0');
        if (value > (UINT64_MAX - digit) / 10)
            fits = 0;
        value = value * 10 + digit;
    }
    if (p->at < p->end && *p->at == '.') {
        plain = 0;
        p->at++;
        if (p->at >= p->end || !is_digit(*p->at)) {
            fail(p, "a digit must follow the decimal point");
            return -1;
        }
        while (p->at < p->end && is_digit(*p->at))
            p->at++;
    }
    if (p->at < p->end && (*p->at == 'e' || *p->at == 'E')) {
        plain = 0;
        p->at++;
        if (p->at < p->end && (*p->at == '+' || *p->at == '-'))
            p->at++;
        if (p->at >= p->end || !is_digit(*p->at)) {
            fail(p, "a digit must follow the exponent");
            return -1;
        }
        while (p->at < p->end && is_digit(*p->at))
            p->at++;
    }
    char buffer[128];
    size_t n = (size_t)(p->at - start);
    if (n >= sizeof(buffer)) {
        p->at = start;
        fail(p, "number too long");
        return -1;
    }
    v->type = JSON_NUMBER;
    if (plain && fits) {
        v->is_integer = 1;
        v->integer = value;
        v->number = (double)value;
        return 0;
    }
    memcpy(buffer, start, n);
    buffer[n] = '\0';
    v->number = strtod(buffer, NULL);
    return 0;
}

static int match_word(struct parser *p, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(p->end - p->at) < n || memcmp(p->at, word, n) != 0)
        return 0;
    p->at += n;
    return 1;
}

static struct json_value *parse_value(struct parser *p, int depth);

static int by_key(const void *a, const void *b)
{
    return strcmp((*(const struct json_value *const *)a)->key,
                  (*(const struct json_value *const *)b)->key);
}

/* The name of two members of `v` that is the same, or NULL: of a few
 * members (PAIRWISE_KEYS), each pair compared; of more, sorted, so that a
 * hostile object of many members costs n log n. NULL with *failed set when
 * out of memory. */
#define PAIRWISE_KEYS 32
static const char *key_twice(const struct json_value *v, int *failed)
{
    const char *twice = NULL;
    if (v->length <= PAIRWISE_KEYS) {
        for (const struct json_value *a = v->first; a && !twice; a = a->next)
            for (const struct json_value *b = a->next; b && !twice; b = b->next)
                if (a->key[0] == b->key[0] && strcmp(a->key, b->key) == 0)
                    twice = b->key;
        return twice;
    }
    const struct json_value *small[64], **members = small;
    if (v->length > sizeof(small) / sizeof(small[0]) &&
        !(members = malloc(v->length * sizeof(*members)))) {
        *failed = 1;
        return NULL;
    }
    size_t n = 0;
    for (const struct json_value *m = v->first; m; m = m->next)
        members[n++] = m;
    qsort(members, n, sizeof(*members), by_key);
    for (size_t i = 1; i < n && !twice; i++)
        if (strcmp(members[i - 1]->key, members[i]->key) == 0)
            twice = members[i]->key;
    if (members != small)
        free(members);
    return twice;
}

/* An object whose members all have different names; else fails, naming
 * the name (its control bytes shown as '?'). */
static int keys_unique(struct parser *p, const struct json_value *v)
{
    int failed = 0;
    const char *twice = key_twice(v, &failed);
    if (failed) {
        fail(p, "out of memory");
        return -1;
    }
    if (twice) {
        char name[80];
        size_t k = 0;
        for (; twice[k] && k < sizeof(name) - 1; k++)
            name[k] = (unsigned char)twice[k] < 0x20 || twice[k] == 0x7f ? '?' : twice[k];
        name[k] = '\0';
        fail(p, "the key \"%s\" appears twice in one object", name);
    }
    return twice ? -1 : 0;
}

/* 1 if the member `key` of the root object is one to leave out. */
static int skipped(const struct parser *p, int depth, const char *key)
{
    for (const char *const *k = p->skip; k && depth == 1 && *k; k++)
        if (strcmp(*k, key) == 0)
            return 1;
    return 0;
}

/* The bytes that matter inside a value passed over: all others are skipped
 * by one lookup each. */
static const unsigned char skip_stops[256] =
    {['"'] = 1, ['{'] = 1, ['}'] = 1, ['['] = 1, [']'] = 1};

/* Pass over the value at p->at without a node: its brackets matched, its
 * strings closed (their escapes skipped), nothing else checked. 0, or -1. */
static int skip_value(struct parser *p)
{
    long depth = 0;
    skip_space(p);
    const char *at = p->at, *end = p->end;
    do {
        while (depth > 0 && at < end && !skip_stops[(unsigned char)*at])
            at++;
        if (at >= end) {
            p->at = at;
            fail(p, "unexpected end of input in a value");
            return -1;
        }
        char c = *at++;
        if (c == '"') {
            /* Its closing quote: the first one after an even run of
             * backslashes (an odd run escapes it). */
            for (;;) {
                const char *quote = memchr(at, '"', (size_t)(end - at));
                if (!quote) {
                    p->at = end;
                    fail(p, "unexpected end of input in a string");
                    return -1;
                }
                const char *run = quote;
                while (run > at && run[-1] == '\\')
                    run--;
                at = quote + 1;
                if ((quote - run) % 2 == 0)
                    break;
            }
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            depth--;
        } else if (depth == 0) {
            while (at < end && *at != ',' && *at != '}' && *at != ']' && *at != ' ' &&
                   *at != '\n' && *at != '\r' && *at != '\t')
                at++; /* a number or a word */
        }
    } while (depth > 0);
    p->at = at;
    if (depth < 0) {
        fail(p, "unexpected closing bracket, expected a value");
        return -1;
    }
    return 0;
}

/* An array or an object, its opening bracket at p->at. */
static int parse_members(struct parser *p, struct json_value *v, int depth, int object)
{
    char close = object ? '}' : ']';
    struct json_value **tail = &v->first;
    p->at++;
    skip_space(p);
    if (p->at < p->end && *p->at == close) {
        p->at++;
        return 0;
    }
    for (;;) {
        const char *key = NULL;
        if (object) {
            skip_space(p);
            if (p->at >= p->end || *p->at != '"') {
                fail(p, p->at >= p->end ? "unexpected end of input in an object"
                                        : "expected a string as the object key");
                return -1;
            }
            size_t key_length;
            key = parse_string(p, &key_length);
            if (!key)
                return -1;
            skip_space(p);
            if (p->at >= p->end || *p->at != ':') {
                fail(p, "expected ':' after an object key");
                return -1;
            }
            p->at++;
        }
        if (object && skipped(p, depth, key)) {
            if (skip_value(p) < 0)
                return -1;
        } else {
            struct json_value *member = parse_value(p, depth + 1);
            if (!member)
                return -1;
            member->key = key;
            *tail = member;
            tail = &member->next;
            v->length++;
        }
        skip_space(p);
        if (p->at >= p->end) {
            fail(p, object ? "unexpected end of input in an object"
                           : "unexpected end of input in an array");
            return -1;
        }
        if (*p->at == close) {
            p->at++;
            return object ? keys_unique(p, v) : 0;
        }
        if (*p->at != ',') {
            fail(p,
                 object ? "expected ',' or '}' in an object" : "expected ',' or ']' in an array");
            return -1;
        }
        p->at++;
    }
}

static struct json_value *parse_value(struct parser *p, int depth)
{
    if (depth > JSON_MAX_DEPTH) {
        fail(p, "nested deeper than %d levels", JSON_MAX_DEPTH);
        return NULL;
    }
    skip_space(p);
    if (p->at >= p->end) {
        fail(p, "unexpected end of input, expected a value");
        return NULL;
    }
    struct json_value *v = arena_alloc(p->doc, sizeof(*v));
    if (!v) {
        fail(p, "out of memory");
        return NULL;
    }
    *v = (struct json_value){0};
    char c = *p->at;
    int status = 0;
    if (c == '{') {
        v->type = JSON_OBJECT;
        status = parse_members(p, v, depth, 1);
    } else if (c == '[') {
        v->type = JSON_ARRAY;
        status = parse_members(p, v, depth, 0);
    } else if (c == '"') {
        v->type = JSON_STRING;
        v->string = parse_string(p, &v->length);
        status = v->string ? 0 : -1;
    } else if (c == '-' || is_digit(c)) {
        status = parse_number(p, v);
    } else if (match_word(p, "true")) {
        v->type = JSON_TRUE;
    } else if (match_word(p, "false")) {
        v->type = JSON_FALSE;
    } else if (match_word(p, "null")) {
        v->type = JSON_NULL;
    } else {
        if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7f)
            fail(p, "unexpected character '%c', expected a value", c);
        else
            fail(p, "unexpected byte 0x%02x, expected a value", (unsigned char)c);
        status = -1;
    }
    return status < 0 ? NULL : v;
}

int json_parse(const char *text, size_t length, struct json_document *doc, char *error,
               size_t error_size)
{
    return json_parse_skipping(text, length, NULL, doc, error, error_size);
}

int json_parse_skipping(const char *text, size_t length, const char *const *skip,
                        struct json_document *doc, char *error, size_t error_size)
{
    struct parser p = {text, text, text + length, doc, error, error_size, 0, skip};
    doc->root = NULL;
    doc->chunks = NULL;
    if (error_size)
        error[0] = '\0';
    struct json_value *root = parse_value(&p, 1);
    if (root) {
        skip_space(&p);
        if (p.at < p.end)
            fail(&p, "unexpected text after the end of the document");
        else
            doc->root = root;
    }
    return p.failed ? -1 : 0;
}

const struct json_value *json_get(const struct json_value *object, const char *key)
{
    if (!object || object->type != JSON_OBJECT)
        return NULL;
    for (const struct json_value *m = object->first; m; m = m->next)
        if (m->key[0] == key[0] && strcmp(m->key, key) == 0)
            return m;
    return NULL;
}

const char *json_string(const struct json_value *value)
{
    return value && value->type == JSON_STRING ? value->string : NULL;
}

int json_uint(const struct json_value *value, uint64_t *out)
{
    if (!value || value->type != JSON_NUMBER || !value->is_integer)
        return -1;
    *out = value->integer;
    return 0;
}

int json_number(const struct json_value *value, double *out)
{
    if (!value || value->type != JSON_NUMBER)
        return -1;
    *out = value->number;
    return 0;
}
