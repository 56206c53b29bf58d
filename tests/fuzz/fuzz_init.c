/* fuzz_init.c — LLVMFuzzerInitialize for the reader harnesses: they all
 * need the same start, the memory budget of one input (fuzz_common.h).
 * A harness that needs more (fuzz_cli.c) defines its own and does not
 * link this file (tests/fuzz/meson.build). */
#include "fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_init_budget();
    return 0;
}
