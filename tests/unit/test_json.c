/* test_json.c - the JSON reader: values, escapes, exact integers, and the
 * errors (with line and column) for malformed input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "json.h"

static int parses(const char *text)
{
    struct json_document doc;
    char error[256];
    int status = json_parse(text, strlen(text), &doc, error, sizeof(error));
    json_free(&doc);
    return status == 0;
}

/* The error message for `text`, which must not parse. */
static const char *error_of(const char *text)
{
    static char error[256];
    struct json_document doc;
    if (json_parse(text, strlen(text), &doc, error, sizeof(error)) == 0)
        strcpy(error, "(parsed)");
    json_free(&doc);
    return error;
}

static void test_values(void)
{
    const char *text = "{\"a\": [1, -2.5, 1e3, true, false, null],\n"
                       " \"big\": 18446744073709551615, \"over\": 18446744073709551616,\n"
                       " \"s\": \"q\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\", \"e\": {}}";
    struct json_document doc;
    char error[256];
    CHECK(json_parse(text, strlen(text), &doc, error, sizeof(error)) == 0);
    const struct json_value *a = json_get(doc.root, "a");
    CHECK(a && a->type == JSON_ARRAY && a->length == 6);
    const struct json_value *item = a ? a->first : NULL;
    uint64_t u = 0;
    double d = 0;
    CHECK(item && json_uint(item, &u) == 0 && u == 1);
    item = item ? item->next : NULL;
    CHECK(item && json_uint(item, &u) < 0 && json_number(item, &d) == 0 && d == -2.5);
    item = item ? item->next : NULL;
    CHECK(item && !item->is_integer && item->number == 1000.0);
    item = item ? item->next : NULL;
    CHECK(item && item->type == JSON_TRUE);
    item = item ? item->next : NULL;
    CHECK(item && item->type == JSON_FALSE);
    item = item ? item->next : NULL;
    CHECK(item && item->type == JSON_NULL && item->next == NULL);
    CHECK(json_uint(json_get(doc.root, "big"), &u) == 0 && u == UINT64_MAX);
    const struct json_value *over = json_get(doc.root, "over");
    CHECK(over && over->type == JSON_NUMBER && !over->is_integer && over->number > 1.8e19);
    const char *s = json_string(json_get(doc.root, "s"));
    CHECK(s && strcmp(s, "q\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80") == 0);
    const struct json_value *e = json_get(doc.root, "e");
    CHECK(e && e->type == JSON_OBJECT && e->length == 0 && e->first == NULL);
    CHECK(json_get(doc.root, "missing") == NULL);
    CHECK(json_get(a, "a") == NULL); /* not an object */
    CHECK(json_string(a) == NULL);
    json_free(&doc);
    CHECK(doc.chunks == NULL && doc.root == NULL);

    /* \u0000 inside a string: kept, and counted in the length. */
    CHECK(json_parse("\"a\\u0000b\"", 10, &doc, error, sizeof(error)) == 0);
    CHECK(doc.root && doc.root->length == 3 && doc.root->string[2] == 'b');
    json_free(&doc);

    /* Many members: more than one arena chunk. */
    size_t size = 200000 * 4 + 16, used = 0;
    char *many = malloc(size);
    many[used++] = '[';
    for (int i = 0; i < 200000; i++)
        used += (size_t)snprintf(many + used, size - used, i ? ",%d" : "%d", i % 10);
    many[used++] = ']';
    CHECK(json_parse(many, used, &doc, error, sizeof(error)) == 0);
    CHECK(doc.root && doc.root->length == 200000);
    json_free(&doc);
    free(many);
}

static void test_errors(void)
{
    CHECK(strcmp(error_of(""), "line 1, column 1: unexpected end of input, expected a value") == 0);
    CHECK(strcmp(error_of("{\"a\" 1}"), "line 1, column 6: expected ':' after an object key") == 0);
    CHECK(strcmp(error_of("{\n  \"a\": 1,\n  \"b\" }"),
                 "line 3, column 7: expected ':' after an object key") == 0);
    CHECK(strcmp(error_of("[1, 2"), "line 1, column 6: unexpected end of input in an array") == 0);
    CHECK(strcmp(error_of("[1 2]"), "line 1, column 4: expected ',' or ']' in an array") == 0);
    CHECK(strcmp(error_of("{\"a\":1,}"), "line 1, column 8: expected a string as the object key") ==
          0);
    CHECK(strcmp(error_of("[1,]"),
                 "line 1, column 4: unexpected character ']', expected a value") == 0);
    CHECK(strcmp(error_of("\"abc"), "line 1, column 2: unterminated string") == 0);
    CHECK(strstr(error_of("\"a\tb\""), "control character") != NULL);
    CHECK(strstr(error_of("\"\\x\""), "unknown escape '\\x'") != NULL);
    CHECK(strstr(error_of("\"\\u12g4\""), "four hex digits") != NULL);
    CHECK(strstr(error_of("\"\\ud800\""), "high surrogate") != NULL);
    CHECK(strstr(error_of("\"\\ud800\\u0041\""), "high surrogate") != NULL);
    CHECK(strstr(error_of("\"\\udc00\""), "low surrogate") != NULL);
    CHECK(strstr(error_of("01"), "cannot start with 0") != NULL);
    CHECK(strstr(error_of("-"), "needs a digit") != NULL);
    CHECK(strstr(error_of("1."), "decimal point") != NULL);
    CHECK(strstr(error_of("1e"), "exponent") != NULL);
    CHECK(strstr(error_of("tru"), "unexpected character 't'") != NULL);
    CHECK(strstr(error_of("{} x"), "after the end of the document") != NULL);
    CHECK(strstr(error_of("\xff"), "unexpected byte 0xff") != NULL);
    CHECK(strstr(error_of("{\"a\":"), "unexpected end of input") != NULL);

    /* A name twice in one object, named; the same name in two objects is fine. */
    CHECK(strcmp(error_of("{\"total\": 1, \"kind\": 2, \"total\": 3}"),
                 "line 1, column 36: the key \"total\" appears twice in one object") == 0);
    CHECK(strstr(error_of("{\"a\": {\"x\\n\": 1, \"x\\n\": 2}}"), "the key \"x?\" appears twice") !=
          NULL);
    CHECK(parses("[{\"a\": 1}, {\"a\": 2}]"));
    char wide[100 * 16];
    size_t used = 0;
    wide[used++] = '{';
    for (int i = 0; i < 100; i++)
        used += (size_t)snprintf(wide + used, sizeof(wide) - used, "%s\"k%d\": %d", i ? ", " : "",
                                 i % 99, i);
    strcpy(wide + used, "}");
    CHECK(strstr(error_of(wide), "the key \"k0\" appears twice") != NULL);

    /* Depth: JSON_MAX_DEPTH levels parse, one more does not. */
    char deep[2 * JSON_MAX_DEPTH + 8];
    size_t n = 0;
    for (int i = 0; i < JSON_MAX_DEPTH; i++)
        deep[n++] = '[';
    for (int i = 0; i < JSON_MAX_DEPTH; i++)
        deep[n++] = ']';
    deep[n] = '\0';
    CHECK(parses(deep));
    memmove(deep + 1, deep, n + 1);
    deep[0] = '[';
    strcat(deep, "]");
    CHECK(strstr(error_of(deep), "nested deeper than") != NULL);
    CHECK(parses(" \n\t[ ] \r\n"));
}

/* Members of the root left out: not in the tree, whatever they hold
 * (brackets and quotes in strings, escaped quotes, nesting), the others
 * read as without; deeper members of the same name kept; a skipped value
 * that does not end, or a stray bracket, is an error. */
static void test_skipping(void)
{
    static const char *const skip[] = {"timeline", "blob", NULL};
    const char *text = "{\"a\":1,\"timeline\":{\"events\":[[1,\"x]}\\\"{\"],[2,{\"q\":[]}]]},"
                       "\"blob\": -12.5e3 ,\"b\":{\"timeline\":7},\"c\":\"end\"}";
    struct json_document doc;
    char error[128];
    CHECK(json_parse_skipping(text, strlen(text), skip, &doc, error, sizeof(error)) == 0);
    uint64_t v = 0;
    CHECK(doc.root && doc.root->length == 3 && !json_get(doc.root, "timeline") &&
          !json_get(doc.root, "blob"));
    CHECK(json_uint(json_get(doc.root, "a"), &v) == 0 && v == 1);
    CHECK(json_uint(json_get(json_get(doc.root, "b"), "timeline"), &v) == 0 && v == 7);
    CHECK(strcmp(json_string(json_get(doc.root, "c")), "end") == 0);
    json_free(&doc);
    const char *unended = "{\"timeline\":[1,[2,3]";
    CHECK(json_parse_skipping(unended, strlen(unended), skip, &doc, error, sizeof(error)) < 0 &&
          strstr(error, "unexpected end of input") != NULL);
    json_free(&doc);
    const char *stray = "{\"blob\":]}";
    CHECK(json_parse_skipping(stray, strlen(stray), skip, &doc, error, sizeof(error)) < 0 &&
          strstr(error, "unexpected closing bracket") != NULL);
    json_free(&doc);
}

/* Where a fast path hands over to the careful one: an integer past 2^53
 * rounded as strtod rounds it, kept exact; a string clean up to an escape
 * or a control byte; names alike in their first byte; a skipped string
 * that ends on a backslash. */
static void test_fast_paths(void)
{
    const char *text = "{\"n\": 9007199254740993, \"ab\": \"plain, then \\u00e9\", "
                       "\"ac\": \"\", \"m\": -9007199254740993}";
    struct json_document doc;
    char error[128];
    CHECK(json_parse(text, strlen(text), &doc, error, sizeof(error)) == 0);
    const struct json_value *n = json_get(doc.root, "n");
    CHECK(n && n->is_integer && n->integer == 9007199254740993ull &&
          n->number == strtod("9007199254740993", NULL));
    const struct json_value *m = json_get(doc.root, "m");
    CHECK(m && !m->is_integer && m->number == strtod("-9007199254740993", NULL));
    CHECK(strcmp(json_string(json_get(doc.root, "ab")), "plain, then \xc3\xa9") == 0);
    const struct json_value *empty = json_get(doc.root, "ac");
    CHECK(empty && empty->length == 0 && empty->string[0] == '\0' && empty->next != NULL);
    json_free(&doc);
    CHECK(strstr(error_of("\"clean then\x01\""), "control character") != NULL);
    CHECK(strstr(error_of("\"clean then \\"), "unterminated string") != NULL);
    CHECK(strstr(error_of("{\"ab\": 1, \"ba\": 2, \"ab\": 3}"), "the key \"ab\" appears twice") !=
          NULL);
    static const char *const skip[] = {"timeline", NULL};
    const char *unended = "{\"timeline\":[\"a\\";
    CHECK(json_parse_skipping(unended, strlen(unended), skip, &doc, error, sizeof(error)) < 0 &&
          strstr(error, "unexpected end of input in a string") != NULL);
    json_free(&doc);
}

int main(void)
{
    test_values();
    test_errors();
    test_skipping();
    test_fast_paths();
    return check_done("test_json");
}
