/* test_config.c - the environment parsers, and the one-line messages for bad values. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "config.h"

static void test_parsers(void)
{
    int b = -1;
    long n = -1;
    uint64_t size = 0;
    int formats = 0;

    CHECK(config_parse_bool("yes", &b) == 0 && b == 1);
    CHECK(config_parse_bool("OFF", &b) == 0 && b == 0);
    CHECK(config_parse_bool("2", &b) < 0);
    CHECK(config_parse_bool("", &b) < 0);

    CHECK(config_parse_int("32", 0, 256, &n) == 0 && n == 32);
    CHECK(config_parse_int("257", 0, 256, &n) < 0);
    CHECK(config_parse_int("-1", 0, 256, &n) < 0);
    CHECK(config_parse_int("12abc", 0, 256, &n) < 0);
    CHECK(config_parse_int("abc", 0, 256, &n) < 0);
    CHECK(config_parse_int("99999999999999999999999", 0, 256, &n) < 0);

    CHECK(config_parse_size("4096", &size) == 0 && size == 4096);
    CHECK(config_parse_size("64K", &size) == 0 && size == 65536);
    CHECK(config_parse_size("1M", &size) == 0 && size == 1048576);
    CHECK(config_parse_size("2GiB", &size) == 0 && size == 2ull << 30);
    CHECK(config_parse_size("10B", &size) == 0 && size == 10);
    CHECK(config_parse_size("1.5M", &size) < 0);
    CHECK(config_parse_size("M", &size) < 0);
    CHECK(config_parse_size("-5", &size) < 0);
    CHECK(config_parse_size("99999999999T", &size) < 0);

    CHECK(config_parse_formats("json", &formats) == 0 && formats == FORMAT_JSON);
    CHECK(config_parse_formats("text,json", &formats) == 0 &&
          formats == (FORMAT_TEXT | FORMAT_JSON));
    CHECK(config_parse_formats("none", &formats) == 0 && formats == 0);
    CHECK(config_parse_formats("xml", &formats) < 0);
    CHECK(config_parse_formats("text,", &formats) == 0 && formats == FORMAT_TEXT);
    CHECK(config_parse_formats(",", &formats) < 0);
    CHECK(config_parse_formats("text,json,html", &formats) == 0 &&
          formats == (FORMAT_TEXT | FORMAT_JSON | FORMAT_HTML));
    CHECK(config_parse_formats("folded,PERFETTO,memviz", &formats) == 0 &&
          formats == (FORMAT_FOLDED | FORMAT_PERFETTO | FORMAT_MEMVIZ));
    CHECK(config_parse_formats("htm", &formats) < 0);
    CHECK(config_parse_formats("html5", &formats) < 0);

    char names[64];
    CHECK(strcmp(config_format_names(FORMAT_JSON | FORMAT_HTML, names, sizeof(names)),
                 "json,html") == 0);
    CHECK(strcmp(config_format_names(0, names, sizeof(names)), "none") == 0);

    uint64_t events = 7;
    CHECK(config_parse_events("100000", &events) == 0 && events == 100000);
    CHECK(config_parse_events("1M", &events) == 0 && events == 1 << 20);
    CHECK(config_parse_events("0", &events) == 0 && events == 0);
    CHECK(config_parse_events("64M", &events) == 0 && events == 64u << 20);
    CHECK(config_parse_events("65M", &events) < 0);
    CHECK(config_parse_events("1MB", &events) < 0);
    CHECK(config_parse_events("lots", &events) < 0 && events == 64u << 20);
}

/* Bad values: one line each, naming variable, value and default; defaults kept. */
static void test_bad_environment(void)
{
    char path[] = "/tmp/cumemtrace-test-config-XXXXXX";
    int fd = mkstemp(path);
    int saved = dup(2);
    dup2(fd, 2);
    setenv("CUMEMTRACE_DEPTH", "deep", 1);
    setenv("CUMEMTRACE_MIN_SIZE", "1.5M", 1);
    setenv("CUMEMTRACE_FORMAT", "xml", 1);
    setenv("CUMEMTRACE_QUIET", "maybe", 1);
    setenv("CUMEMTRACE_TOP", "0", 1);
    config_load();
    dup2(saved, 2);

    char text[4096] = {0};
    lseek(fd, 0, SEEK_SET);
    ssize_t n = read(fd, text, sizeof(text) - 1);
    close(fd);
    unlink(path);
    CHECK(n > 0);
    int lines = 0;
    for (char *p = text; *p; p++)
        lines += *p == '\n';
    CHECK_EQ(lines, 5);
    CHECK(strstr(
        text,
        "cumemtrace: CUMEMTRACE_DEPTH='deep' is not a whole number from 0 to 256; using 32\n"));
    CHECK(strstr(text, "CUMEMTRACE_MIN_SIZE='1.5M'"));
    CHECK(strstr(text, "CUMEMTRACE_FORMAT='xml'") && strstr(text, "using json"));
    CHECK(strstr(text, "CUMEMTRACE_QUIET='maybe'") && strstr(text, "using 0"));
    CHECK(strstr(text, "CUMEMTRACE_TOP='0'"));
    CHECK_EQ(config.depth, 32);
    CHECK_EQ(config.min_size, 0);
    CHECK_EQ(config.formats, FORMAT_JSON);
    CHECK_EQ(config.quiet, 0);
    CHECK_EQ(config.top, 5);

    setenv("CUMEMTRACE_DEPTH", "8", 1);
    setenv("CUMEMTRACE_MIN_SIZE", "1M", 1);
    setenv("CUMEMTRACE_FORMAT", "text,json", 1);
    setenv("CUMEMTRACE_QUIET", "1", 1);
    setenv("CUMEMTRACE_TOP", "3", 1);
    config_load();
    CHECK_EQ(config.depth, 8);
    CHECK_EQ(config.min_size, 1 << 20);
    CHECK_EQ(config.formats, FORMAT_TEXT | FORMAT_JSON);
    CHECK_EQ(config.quiet, 1);
    CHECK_EQ(config.top, 3);
}

/* Checking without using: config_check, the closest name, known names. */
static void test_checking(void)
{
    char why[200];
    CHECK_EQ(config_check("CUMEMTRACE_TOP", "3", why, sizeof(why)), 0);
    CHECK_EQ(config_check("CUMEMTRACE_TOP", "abc", why, sizeof(why)), -1);
    CHECK(strcmp(why, "is not a whole number from 1 to 100000") == 0);
    CHECK_EQ(config_check("CUMEMTRACE_SIGNAL", "TERM", why, sizeof(why)), -1);
    CHECK(strstr(why, "relies on") != NULL);
    CHECK_EQ(config_check("CUMEMTRACE_FORMAT", "htm", why, sizeof(why)), -1);
    CHECK_EQ(config_check("CUMEMTRACE_EVENTS", "lots", why, sizeof(why)), -1);
    CHECK_EQ(config_check("CUMEMTRACE_OUTPUT", "", why, sizeof(why)), -1);
    CHECK_EQ(config_check("CUMEMTRACE_OUTPUT", "dir/", why, sizeof(why)), 0);
    CHECK_EQ(config_check("CUMEMTRACE_QIUET", "1", why, sizeof(why)), -2);
    CHECK(config_closest("CUMEMTRACE_QIUET") &&
          strcmp(config_closest("CUMEMTRACE_QIUET"), "CUMEMTRACE_QUIET") == 0);
    CHECK(config_closest("CUMEMTRACE_OUTPT") &&
          strcmp(config_closest("CUMEMTRACE_OUTPT"), "CUMEMTRACE_OUTPUT") == 0);
    CHECK(config_closest("CUMEMTRACE_SOMETHING_ELSE") == NULL);
    CHECK(config_known("CUMEMTRACE_TEST_PRELOAD_FIRST") && config_known("CUMEMTRACE_NO_LIBDW"));
    CHECK(!config_known("CUMEMTRACE_QIUET"));
    char template_[2 * CONFIG_TEXT_MAX];
    setenv("CUMEMTRACE_OUTPUT", "reports/", 1);
    CHECK(strcmp(config_output_template(template_, sizeof(template_)), "reports/cumemtrace-%p") ==
          0);
    unsetenv("CUMEMTRACE_OUTPUT");
    CHECK(strcmp(config_output_template(template_, sizeof(template_)), "cumemtrace-%p") == 0);
}

int main(void)
{
    test_parsers();
    test_bad_environment();
    test_checking();
    return check_done("test_config");
}
