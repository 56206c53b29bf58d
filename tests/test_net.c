#include "nc_test.h"
int main(void) { return nc_test_done(); }
