#include <malloc.h>
#include "CMallocStats.h"

size_t malloc_bytes_in_use(void) {
    struct mallinfo2 info = mallinfo2();
    return info.uordblks + info.hblkhd;
}
