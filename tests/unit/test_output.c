/* test_output.c - report path templates, JSON and terminal escaping. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "output.h"

/* Write `text` to a new file for `path` and publish it (replace it, when
 * `previous` or `replace`); the name used in `path`. */
static int write_new(char *path, const char *text, const struct out_identity *previous, int replace,
                     struct out_identity *id)
{
    static struct out out;
    if (out_create(&out, path, 0600) < 0)
        return -1;
    out_str(&out, text);
    return previous || replace ? out_replace(&out, path, 4096, ".json", previous, id)
                               : out_publish(&out, path, 4096, ".json", id);
}

static int holds(const char *path, const char *text)
{
    char buffer[64] = {0};
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, buffer, sizeof(buffer) - 1) : -1;
    if (fd >= 0)
        close(fd);
    return n >= 0 && strcmp(buffer, text) == 0;
}

/* Files are made new and named without replacing, or following, anything. */
static void check_files(void)
{
    char dir[] = "/tmp/cumemtrace-test-files-XXXXXX", path[4096], expected[4096];
    struct out_identity first, other;
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof(path), "%s/r.json", dir);
    CHECK(write_new(path, "one", NULL, 0, &first) == 0 && holds(path, "one"));
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);

    snprintf(path, sizeof(path), "%s/r.json", dir); /* taken: -PID */
    CHECK(write_new(path, "two", NULL, 0, &other) == 0);
    snprintf(expected, sizeof(expected), "%s/r-%d.json", dir, (int)getpid());
    CHECK(strcmp(path, expected) == 0 && holds(path, "two"));
    snprintf(path, sizeof(path), "%s/r.json", dir);
    CHECK(holds(path, "one"));
    CHECK(write_new(path, "three", NULL, 0, NULL) == 0); /* and then -PID-2 */
    snprintf(expected, sizeof(expected), "%s/r-%d-2.json", dir, (int)getpid());
    CHECK(strcmp(path, expected) == 0);

    char victim[4096], link[4096]; /* a link is never followed */
    snprintf(victim, sizeof(victim), "%s/victim", dir);
    snprintf(link, sizeof(link), "%s/l.json", dir);
    int fd = open(victim, O_WRONLY | O_CREAT, 0600);
    CHECK(fd >= 0 && write(fd, "mine", 4) == 4);
    close(fd);
    CHECK(symlink(victim, link) == 0);
    snprintf(path, sizeof(path), "%s", link);
    CHECK(write_new(path, "four", NULL, 0, NULL) == 0 && strcmp(path, link) != 0);
    CHECK(holds(victim, "mine"));

    snprintf(path, sizeof(path), "%s/r.json", dir); /* our own file: replaced */
    CHECK(write_new(path, "five", &first, 0, &first) == 0);
    snprintf(expected, sizeof(expected), "%s/r.json", dir);
    CHECK(strcmp(path, expected) == 0 && holds(path, "five"));
    CHECK(write_new(path, "six", &other, 0, NULL) == 0); /* not ours: a new name */
    CHECK(strcmp(path, expected) != 0 && holds(expected, "five"));

    snprintf(path, sizeof(path), "%s/fifo.json", dir); /* -o: only regular files */
    CHECK(mkfifo(path, 0600) == 0);
    CHECK(write_new(path, "seven", NULL, 1, NULL) < 0);
    snprintf(path, sizeof(path), "%s/r.json", dir);
    CHECK(write_new(path, "eight", NULL, 1, NULL) == 0 && holds(path, "eight"));

    DIR *listing = opendir(dir); /* no temporary left */
    int temporaries = 0;
    for (struct dirent *e; listing && (e = readdir(listing));)
        temporaries += strstr(e->d_name, ".tmp") != NULL;
    if (listing)
        closedir(listing);
    CHECK(listing && temporaries == 0);
    char command[4200];
    snprintf(command, sizeof(command), "rm -rf %s", dir);
    CHECK(system(command) == 0);
}

/* A Python frame's file as reports name it (output_real_path). */
static void check_real_paths(void)
{
    char dir[] = "/tmp/cumemtrace-test-paths-XXXXXX", real[PATH_MAX], path[PATH_MAX + 32],
         want[PATH_MAX + 32];
    CHECK(mkdtemp(dir) != NULL && realpath(dir, real) != NULL);
    snprintf(path, sizeof(path), "%s/x", real);
    CHECK(mkdir(path, 0700) == 0);
    snprintf(path, sizeof(path), "%s/x/train.py", real);
    int fd = open(path, O_CREAT | O_WRONLY, 0600);
    CHECK(fd >= 0);
    close(fd);
    snprintf(path, sizeof(path), "%s/link", real);
    CHECK(symlink("x", path) == 0);
    char in[PATH_MAX + 32], out[PATH_MAX + 32];
    snprintf(want, sizeof(want), "%s/x/train.py", real);
    snprintf(in, sizeof(in), "%s/y/../link/./train.py", real);
    CHECK(output_real_path(in, NULL, out, sizeof(out)) == 1 && strcmp(out, want) == 0);
    CHECK(output_real_path("../x//train.py", path, out, sizeof(out)) == 1 &&
          strcmp(out, want) == 0); /* from `start_dir`, here the link */
    CHECK(output_real_path(want, NULL, out, sizeof(out)) == 0 && strcmp(out, want) == 0);
    /* No such file: an absolute path by name, a relative name as it is. */
    CHECK(output_real_path("/no/such/../where//a.py", NULL, out, sizeof(out)) == 1 &&
          strcmp(out, "/no/where/a.py") == 0);
    CHECK(output_real_path("pkg/mod.pyx", real, out, sizeof(out)) == 0 &&
          strcmp(out, "pkg/mod.pyx") == 0);
    CHECK(output_real_path("x/train.py", NULL, out, sizeof(out)) == 0 &&
          strcmp(out, "x/train.py") == 0);
    const char *names[] = {"<string>", "<frozen importlib._bootstrap>", "<eval_with_key>.3"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        CHECK(output_real_path(names[i], real, out, sizeof(out)) == 0 &&
              strcmp(out, names[i]) == 0);
    output_path_normal("a/./b/../../../c", out, sizeof(out));
    CHECK(strcmp(out, "../c") == 0);
    unlink(path);
    snprintf(path, sizeof(path), "%s/x/train.py", real);
    unlink(path);
    snprintf(path, sizeof(path), "%s/x", real);
    rmdir(path);
    rmdir(real);
}

int main(void)
{
    check_files();
    check_real_paths();
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
    out_json_string(&out, "caf\xe9 \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 "
                          "\xed\xa0\x80 \xc0\xaf \x1b");
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
    CHECK(strcmp(output_text(NULL, shown, sizeof(shown)), "?") == 0); /* a report's missing name */

    char bytes[32];
    format_bytes(1536, bytes, sizeof(bytes));
    CHECK(strcmp(bytes, "1.50 KiB") == 0);
    format_bytes(512, bytes, sizeof(bytes));
    CHECK(strcmp(bytes, "512 B") == 0);
    format_bytes(3ull << 30, bytes, sizeof(bytes));
    CHECK(strcmp(bytes, "3.00 GiB") == 0);
    return check_done("test_output");
}
