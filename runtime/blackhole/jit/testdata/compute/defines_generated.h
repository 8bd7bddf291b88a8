#define REDUCE_DIM ReduceDim::REDUCE_ROW
#define REDUCE_OP PoolType::SUM
#define NOC_MODE 0
