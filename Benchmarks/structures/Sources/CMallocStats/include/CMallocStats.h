#include <stddef.h>

/// Bytes in use from malloc: arena chunks plus mmapped chunks (glibc's mallinfo2).
size_t malloc_bytes_in_use(void);
