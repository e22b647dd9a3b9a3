/* A picture of a tensor's values (-o pictures), for the thumbnails of a
 * file manager: a heatmap of a 2-D tensor, a histogram of any other, as a
 * PNG (libpng) with a 256-colour palette.
 *
 * Its size must be known before it is drawn (ls -l draws nothing): the
 * picture's dimensions follow from the shape alone, the image data is
 * stored without compression and the one text chunk has a fixed length,
 * so two pictures of one size are files of one size (tfs_picture_size).
 * Its time is bounded: at most TFS_PICTURE_BUDGET elements are read, in
 * at most 1,024 runs, however large the tensor. */
#ifndef TFS_PICTURE_H
#define TFS_PICTURE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "model/model.h"

#define TFS_PICTURE_BUDGET (16u << 20) /* elements read at most */
#define TFS_PICTURE_MAX 1024           /* heatmap pixels a side, before scaling up */
#define TFS_PICTURE_HIST_W 512         /* a histogram's picture */
#define TFS_PICTURE_HIST_H 256

/* The picture's width and height in pixels. */
void tfs_picture_dims(const struct tfs_table *h, const struct tfs_tensor *t, uint32_t *w, uint32_t *ht);

/* The size in bytes of any picture of w x ht pixels. */
tfs_err tfs_picture_size(uint32_t w, uint32_t ht, size_t *len);

/* The picture, malloc'd, in *png (*len bytes). */
tfs_err tfs_picture_png(const struct tfs_shard *sh, const struct tfs_tensor *t, unsigned char **png,
			size_t *len);

#endif
