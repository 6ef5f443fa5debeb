// One process per GPU under mpirun: the NCCL rank group (unique id over MPI) gathers exact rank-major blocks,
// and the layer-ahead prefix gather assembles every rank's send block in every rank's slot for every layer.
// Without mpirun (OMPI_COMM_WORLD_SIZE unset) every test skips and MPI is never initialized.
#include <cuda_runtime.h>
#include <mpi.h>

#include <cstdlib>
#include <gtest/gtest.h>

#include "gpu/collective.h"
#include "gpu/device.h"
#include "gpu/prefix_gather.h"
#include "props/gpu_test_data.h"

namespace kvshard::props {
namespace {

int g_rank = 0, g_size = 0;  // g_size == 0: not under mpirun
std::unique_ptr<gpu::RankGroup> g_group;
std::unique_ptr<gpu::RankGroup> g_gather_group;  // dedicated communicator for the layer-ahead gather

#define REQUIRE_MPI()                                                                                     \
  do {                                                                                                    \
    if (g_size < 2 || !g_group) GTEST_SKIP() << "SKIPPED: needs mpirun with >= 2 ranks and one GPU each"; \
  } while (0)

// Every rank's verdict on the steps before a collective (an MPI all-reduce of `ok`): a rank whose step failed
// has reported its status through gtest, and all ranks then leave the test together (a failed ASSERT on every
// rank) instead of the others waiting forever in NCCL for it.
bool AllRanksOk(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  return all == 1;
}

TEST(NcclMpi, AllGatherInPlace) {
  REQUIRE_MPI();
  for (int64_t bytes : {int64_t{8}, int64_t{1152}, int64_t{4} << 20}) {
    std::vector<uint8_t> host(g_size * bytes, 0xEE);
    FillRow(host.data() + g_rank * bytes, bytes, g_rank, 77);
    auto buf = gpu::Upload(host);
    EXPECT_TRUE(buf.ok()) << "rank " << g_rank << ": " << buf.status().ToString();
    ASSERT_TRUE(AllRanksOk(buf.ok())) << "rank " << g_rank << ": a rank failed before the all-gather";
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
    const Status gathered = g_group->AllGatherInPlace({buf->data()}, bytes, {s});
    ASSERT_TRUE(gathered.ok()) << "rank " << g_rank << ": " << gathered.ToString();
    const Status synced = gpu::SyncStream(s);
    ASSERT_TRUE(synced.ok()) << "rank " << g_rank << ": " << synced.ToString();
    std::vector<uint8_t> want(g_size * bytes);
    for (int r = 0; r < g_size; ++r) FillRow(want.data() + r * bytes, bytes, r, 77);
    // Non-fatal: this rank stays in step with the others' later collectives.
    const auto got = gpu::Download<uint8_t>(buf->data(), want.size());
    EXPECT_TRUE(got.ok()) << "rank " << g_rank << ": " << got.status().ToString();
    if (got.ok()) {
      const Status cmp = CompareRows(*got, want, bytes, "all-gather");
      EXPECT_TRUE(cmp.ok()) << "rank " << g_rank << ": " << cmp.message();
    }
    cudaStreamDestroy(s);
  }
}

TEST(NcclMpi, LayerAheadGatherAssemblesEveryLayer) {
  REQUIRE_MPI();
  gpu::PrefixGatherShape shape;
  shape.layers = 5;
  shape.page_size = 16;
  shape.pool_rows = 8 * 16;
  shape.max_prefix_tokens = g_size * 4 * 16;
  shape.chunk_tokens = 0;
  shape.row_bytes = 576;
  shape.n_page_pos = 1;
  auto g = gpu::LayerAheadGather::Create(g_gather_group.get(), shape);
  EXPECT_TRUE(g.ok()) << "rank " << g_rank << ": " << g.status().ToString();
  ASSERT_TRUE(AllRanksOk(g.ok())) << "rank " << g_rank << ": a rank failed to create its gather";
  // Rank r owns a different number of pages (rank-asymmetric pads): send local pages then trash page 0.
  const int64_t block_pages = 3;
  std::vector<int64_t> send;
  const int64_t owned = 1 + g_rank % 3;
  for (int64_t p = 0; p < block_pages; ++p) {
    const int64_t local_page = p < owned ? 7 - p : 0;
    for (int64_t o = 0; o < shape.page_size; ++o) send.push_back(local_page * shape.page_size + o);
  }
  bool filled = true;
  for (int64_t l = 0; l < shape.layers && filled; ++l) {
    std::vector<uint8_t> pool(shape.pool_rows * shape.row_bytes);
    for (int64_t row = 0; row < shape.pool_rows; ++row) {
      FillRow(pool.data() + row * shape.row_bytes, shape.row_bytes, l, g_rank * 100000 + row);
    }
    const Status copied = gpu::CopyToDevice((*g)->pool(0, l), pool.data(), pool.size());
    EXPECT_TRUE(copied.ok()) << "rank " << g_rank << " layer " << l << ": " << copied.ToString();
    filled = copied.ok();
  }
  ASSERT_TRUE(AllRanksOk(filled)) << "rank " << g_rank << ": a rank failed to fill its pool";
  // All ranks exchange their send lists so each can compute the expected slot.
  std::vector<int64_t> all_send(g_size * send.size());
  MPI_Allgather(send.data(), static_cast<int>(send.size()), MPI_INT64_T, all_send.data(), static_cast<int>(send.size()),
                MPI_INT64_T, MPI_COMM_WORLD);
  const Status begun = (*g)->BeginExtend(block_pages, {0}, {send}, {});
  ASSERT_TRUE(begun.ok()) << "rank " << g_rank << ": " << begun.ToString();
  const int64_t block_rows = block_pages * shape.page_size;
  for (int64_t l = 0; l < shape.layers; ++l) {
    auto slots = (*g)->AcquireForRead(l);
    ASSERT_TRUE(slots.ok()) << slots.status().ToString();
    const Status synced = gpu::SyncStream((*g)->compute_stream(0));
    ASSERT_TRUE(synced.ok()) << "rank " << g_rank << ": " << synced.ToString();
    std::vector<uint8_t> want(g_size * block_rows * shape.row_bytes);
    for (int r = 0; r < g_size; ++r) {
      for (int64_t j = 0; j < block_rows; ++j) {
        FillRow(want.data() + (r * block_rows + j) * shape.row_bytes, shape.row_bytes, l,
                r * 100000 + all_send[r * block_rows + j]);
      }
    }
    // Non-fatal: this rank keeps issuing the later layers' collectives with the others.
    const auto got = gpu::Download<uint8_t>((*slots)[0], want.size());
    EXPECT_TRUE(got.ok()) << "rank " << g_rank << " layer " << l << ": " << got.status().ToString();
    if (got.ok()) {
      const Status cmp = CompareRows(*got, want, shape.row_bytes, "slot of layer " + std::to_string(l));
      EXPECT_TRUE(cmp.ok()) << "rank " << g_rank << ": " << cmp.message();
    }
  }
  const auto bad = (*g)->BadRows();
  ASSERT_TRUE(bad.ok()) << "rank " << g_rank << ": " << bad.status().ToString();
  EXPECT_EQ(*bad, 0);
}

}  // namespace
}  // namespace kvshard::props

int main(int argc, char** argv) {
  using namespace kvshard;
  ::testing::InitGoogleTest(&argc, argv);
  const bool under_mpi = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
  if (under_mpi) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &props::g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &props::g_size);
    std::string out = ::testing::GTEST_FLAG(output);
    if (!out.empty() && props::g_rank > 0) {
      const size_t dot = out.rfind(".xml");
      ::testing::GTEST_FLAG(output) = out.substr(0, dot) + "_rank" + std::to_string(props::g_rank) + ".xml";
    }
    const int visible = gpu::VisibleDeviceCount();
    if (props::g_size >= 2 && visible > 0) {
      for (auto* target : {&props::g_group, &props::g_gather_group}) {
        gpu::NcclId id{};
        if (props::g_rank == 0) {
          auto made = gpu::NewNcclId();
          if (!made.ok()) {  // as for a failed group below: the others wait in MPI_Bcast, so end the whole job
            std::cerr << "rank 0: " << made.status().ToString() << "\n";
            MPI_Abort(MPI_COMM_WORLD, 3);
          }
          id = *made;
        }
        MPI_Bcast(id.data(), static_cast<int>(id.size()), MPI_BYTE, 0, MPI_COMM_WORLD);
        auto group = gpu::CreateNcclRankGroup(id, props::g_rank, props::g_size, props::g_rank % visible);
        if (!group.ok()) {
          std::cerr << "rank " << props::g_rank << ": " << group.status().ToString() << "\n";
          MPI_Abort(MPI_COMM_WORLD, 3);
        }
        *target = std::move(group).value();
      }
    }
  }
  const int rc = RUN_ALL_TESTS();
  props::g_group.reset();
  props::g_gather_group.reset();
  if (under_mpi) MPI_Finalize();
  return rc;
}
