/* ioimpl.h: helpers of the checkpoint code. */
#ifndef FSDP_IOIMPL_H
#define FSDP_IOIMPL_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C (Castagnoli, the iSCSI/ext4 one): crc of the bytes so far (0 for
   none), extended by buf[len].  FSDPCRC32C_Private(0, "123456789", 9) is
   0xE3069283. */
uint32_t FSDPCRC32C_Private(uint32_t crc, const void *buf, size_t len);
/* crc times x^(8 n) modulo the polynomial: the CRC of A followed by B is
   FSDPCRC32CShift_Private(crc(A), |B|) ^ crc(B), so the CRCs of pieces,
   each shifted by the bytes after it, XOR to the CRC of the whole: ranks
   checksum their own pieces and one MPI_BXOR reduction combines them. */
uint32_t FSDPCRC32CShift_Private(uint32_t crc, uint64_t n);

#endif
