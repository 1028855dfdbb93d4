/* sift_pack.cl — the descriptors as bytes for the read-back of u8 descriptors (SiftOptions::descriptor_type kU8;
 * sift_download.cpp): their values are integers 0..255 (numeric/sift_descriptor.h's finalize rounds and saturates;
 * RootSIFT, whose values are not, cannot ask for bytes), so the conversion is exact and a quarter of the bytes
 * cross the bus. (Part of the sift.cl program.) */

/* sift_descriptors_to_u8: global >= ceil(values / 4), any work-group; work-item i converts values 4i .. 4i + 3 of
 * `desc` (those below `values`) into `out`. */
__kernel void sift_descriptors_to_u8(__global const float* desc, __global uchar* out, uint values) {
  const uint i = (uint)get_global_id(0) * 4u;
  if (i + 4u <= values) {
    vstore4(convert_uchar4(vload4(0, desc + i)), 0, out + i);
    return;
  }
  for (uint k = i; k < values; ++k) out[k] = convert_uchar(desc[k]);
}
