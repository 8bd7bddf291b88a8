#define DST_SYNC_MODE DstSync::SyncHalf
