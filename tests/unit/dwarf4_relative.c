/* dwarf4_relative.c - a program compiled as `gcc -gdwarf-4 dwarf4_relative.c`
 * from its own directory: its line table names the file relative to the
 * compilation directory, which only .debug_info says (test_debuginfo). */
static int __attribute__((noinline)) triple(int x)
{
    return 3 * x + 1;
}

int main(int argc, char **argv)
{
    (void)argv;
    return triple(argc) == 4 ? 0 : 1;
}
