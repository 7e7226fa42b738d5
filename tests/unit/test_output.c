/* test_output.c - report path templates, JSON and terminal escaping. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "output.h"

int main(void)
{
    char path[256], expected[256], host[128];
    setenv("RANK", "3", 1);
    CHECK(output_path("/tmp/run-%p-r%r", ".json", path, sizeof(path)) == 0);
    snprintf(expected, sizeof(expected), "/tmp/run-%d-r3.json", (int)getpid());
    CHECK(strcmp(path, expected) == 0);

    unsetenv("RANK");
    setenv("LOCAL_RANK", "1", 1);
    CHECK(output_path("r%r", ".txt", path, sizeof(path)) == 0 && strcmp(path, "r1.txt") == 0);
    unsetenv("LOCAL_RANK");
    CHECK(output_path("r%r", ".txt", path, sizeof(path)) == 0 && strcmp(path, "r0.txt") == 0);

    gethostname(host, sizeof(host));
    CHECK(output_path("%h-100%%", ".json", path, sizeof(path)) == 0);
    snprintf(expected, sizeof(expected), "%s-100%%.json", host);
    CHECK(strcmp(path, expected) == 0);
    CHECK(output_path("report.json", ".json", path, sizeof(path)) == 0 &&
          strcmp(path, "report.json") == 0);
    CHECK(output_path("x%q", ".json", path, sizeof(path)) == 0 && strcmp(path, "x%q.json") == 0);
    char small[8];
    CHECK(output_path("a-long-name", ".json", small, sizeof(small)) < 0);

    /* JSON escaping, through a real file. */
    char file[] = "/tmp/cumemtrace-test-output-XXXXXX";
    int fd = mkstemp(file);
    struct out out;
    out_fd(&out, fd);
    out_json_string(&out, "a\"b\\c\n\x01");
    out_str(&out, " ");
    out_json_string(&out, NULL);
    out_flush(&out);
    char text[64] = {0};
    lseek(fd, 0, SEEK_SET);
    CHECK(read(fd, text, sizeof(text) - 1) > 0);
    CHECK(strcmp(text, "\"a\\\"b\\\\c\\u000a\\u0001\" null") == 0);
    close(fd);
    unlink(file);

    /* Not UTF-8: each stray byte is the character of its number; well
     * formed sequences pass; controls are escaped. */
    char second[] = "/tmp/cumemtrace-test-output-XXXXXX";
    fd = mkstemp(second);
    out_fd(&out, fd);
    out_json_string(&out, "caf\xe9 \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xed\xa0\x80 \xc0\xaf \x1b");
    out_flush(&out);
    memset(text, 0, sizeof(text));
    lseek(fd, 0, SEEK_SET);
    CHECK(read(fd, text, sizeof(text) - 1) > 0);
    CHECK(strcmp(text, "\"caf\\u00e9 \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 "
                       "\\u00ed\\u00a0\\u0080 \\u00c0\\u00af \\u001b\"") == 0);
    close(fd);
    unlink(second);
    char shown[64];
    CHECK(strcmp(output_text("a\x1b[31mb\x7f\x9b\xc2\x9b caf\xe9 \xc3\xa9", shown, sizeof(shown)),
                 "a\\x1b[31mb\\x7f\\x9b\\x9b caf\xc3\xa9 \xc3\xa9") == 0);
    CHECK(strlen(output_text("\x01\x01\x01\x01\x01\x01", shown, 10)) <= 9);

    char bytes[32];
    format_bytes(1536, bytes, sizeof(bytes));
    CHECK(strcmp(bytes, "1.50 KiB") == 0);
    format_bytes(512, bytes, sizeof(bytes));
    CHECK(strcmp(bytes, "512 B") == 0);
    format_bytes(3ull << 30, bytes, sizeof(bytes));
    CHECK(strcmp(bytes, "3.00 GiB") == 0);
    return check_done("test_output");
}
