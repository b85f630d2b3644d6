// schedules.cpp — ex10.3: collectives as programs of messages.
#include "schedules.hpp"

#include "ring.hpp"
#include "workbook/errors.hpp"

namespace ch10 {
namespace {

bool is_power_of_two(int p) { return p > 0 && (p & (p - 1)) == 0; }

void check_arguments(const torch::Tensor& buffer, int root, const workbook::Communicator& comm, const char* who) {
  WB_CHECK(buffer.dim() == 1 && buffer.is_contiguous(), "{}: a flat, contiguous buffer, not one of shape {}", who,
           fmt::format("{}", buffer.sizes()));
  WB_CHECK(buffer.scalar_type() == torch::kFloat32 || buffer.scalar_type() == torch::kFloat64,
           "{}: float32 or float64, not {}", who, c10::toString(buffer.scalar_type()));
  WB_CHECK(root >= 0 && root < comm.size(), "{}: root {} of {} ranks", who, root, comm.size());
}


}  // namespace

void recursive_doubling_all_reduce(torch::Tensor& buffer, workbook::Communicator& comm) {
  check_arguments(buffer, 0, comm, "recursive_doubling_all_reduce");
  WB_CHECK(is_power_of_two(comm.size()), "recursive_doubling_all_reduce needs a power of two ranks, not {}",
           comm.size());
  // BEGIN SOLUTION ex10.3
  // Note: [doubling partners] In round k a rank swaps with the rank whose
  // number differs in bit k (rank ^ 2^k). After it, each rank holds the sum
  // over the 2^(k+1) ranks that agree with it above bit k; after log₂p
  // rounds, over all. Both partners add the same two sums, so every rank
  // ends with the same bits.
  torch::Tensor incoming = torch::empty_like(buffer);
  for (int distance = 1; distance < comm.size(); distance *= 2) {
    const int partner = comm.rank() ^ distance;
    comm.exchange(buffer, partner, incoming, partner);
    buffer.add_(incoming);
  }
  // END SOLUTION
}

void rabenseifner_all_reduce(torch::Tensor& buffer, workbook::Communicator& comm) {
  check_arguments(buffer, 0, comm, "rabenseifner_all_reduce");
  WB_CHECK(is_power_of_two(comm.size()), "rabenseifner_all_reduce needs a power of two ranks, not {}", comm.size());
  // BEGIN SOLUTION ex10.3
  // Note: [halving, then doubling back] Round k (distance p/2, p/4, ..., 1)
  // splits the range this rank still reduces in two: the rank whose bit is
  // 0 keeps the lower half, its partner (rank ^ distance, the same range)
  // the upper; each sends the half it gives up and adds the half it keeps.
  // After log₂p rounds a rank holds 1/p of the buffer, fully summed. The
  // all-gather runs the rounds backwards, each partner sending its half of
  // the range they shared: the bytes of the first phase, returned.
  struct Round {
    int partner;
    int64_t begin, end;  // the range the two partners shared
  };
  std::vector<Round> rounds;
  int64_t begin = 0, end = buffer.numel();
  for (int distance = comm.size() / 2; distance >= 1; distance /= 2) {
    const int partner = comm.rank() ^ distance;
    const int64_t middle = begin + (end - begin) / 2;
    const bool keeps_lower = (comm.rank() & distance) == 0;
    const int64_t keep_begin = keeps_lower ? begin : middle, keep_end = keeps_lower ? middle : end;
    const int64_t give_begin = keeps_lower ? middle : begin, give_end = keeps_lower ? end : middle;
    torch::Tensor incoming = torch::empty({keep_end - keep_begin}, buffer.options());
    comm.exchange(buffer.slice(0, give_begin, give_end), partner, incoming, partner);
    buffer.slice(0, keep_begin, keep_end).add_(incoming);
    rounds.push_back({partner, begin, end});
    begin = keep_begin;
    end = keep_end;
  }
  for (auto round = rounds.rbegin(); round != rounds.rend(); ++round) {
    // What this rank holds is one half of the shared range; the other half is the partner's.
    const bool holds_lower = begin == round->begin;
    torch::Tensor other = holds_lower ? buffer.slice(0, end, round->end) : buffer.slice(0, round->begin, begin);
    torch::Tensor incoming = torch::empty_like(other);
    comm.exchange(buffer.slice(0, begin, end), round->partner, incoming, round->partner);
    other.copy_(incoming);
    begin = round->begin;
    end = round->end;
  }
  // END SOLUTION
}

void binomial_tree_broadcast(torch::Tensor& buffer, int root, workbook::Communicator& comm) {
  check_arguments(buffer, root, comm, "binomial_tree_broadcast");
  // BEGIN SOLUTION ex10.3
  // Note: [the tree in relative ranks] Number the ranks from the root
  // (relative = (rank − root) mod p). A rank receives once, from the rank
  // whose relative number is its own without its lowest set bit; then it
  // sends to relative + 2^j for each 2^j below that bit, largest first (the
  // largest subtree waits longest for its turn otherwise). Each round
  // doubles the ranks that hold the buffer: ⌈log₂p⌉ rounds.
  const int p = comm.size();
  const int relative = (comm.rank() - root + p) % p;
  int mask = 1;
  for (; mask < p; mask *= 2)
    if (relative & mask) {
      comm.recv(buffer, (relative - mask + root) % p);
      break;
    }
  for (mask /= 2; mask > 0; mask /= 2)
    if (relative + mask < p) comm.send(buffer, (relative + mask + root) % p);
  // END SOLUTION
}

void scatter_all_gather_broadcast(torch::Tensor& buffer, int root, workbook::Communicator& comm) {
  check_arguments(buffer, root, comm, "scatter_all_gather_broadcast");
  // BEGIN SOLUTION ex10.3
  // Note: [a scatter down the binomial tree] The tree of
  // binomial_tree_broadcast, but each rank sends a child only the pieces
  // of that child's subtree: relative ranks [child, child + 2^j). The piece
  // of the rank with relative number v is the segment ring_all_gather wants
  // it to hold on entry, (rank + 1) mod p = (v + root + 1) mod p, so a
  // subtree's pieces are consecutive segments (mod p). The root's link
  // carries (p − 1)/p of the buffer, largest subtree first, and the ring
  // carries the same again: 2(p − 1)/p·n in all, however large p.
  const int p = comm.size();
  if (p == 1) return;
  const int relative = (comm.rank() - root + p) % p;
  // The pieces of `count` ranks from relative rank `first`: consecutive
  // segments mod p, so at most two runs of the buffer.
  auto pieces = [&](int first, int count) {
    std::vector<torch::Tensor> runs;
    for (int index = (first + root + 1) % p; count > 0; index = 0) {
      const int run = std::min(count, p - index);
      runs.push_back(buffer.slice(0, ch04::ring_segment(buffer.numel(), p, index).begin,
                                  ch04::ring_segment(buffer.numel(), p, index + run - 1).end));
      count -= run;
    }
    return runs;
  };
  int mask = 1;
  for (; mask < p; mask *= 2)
    if (relative & mask) {
      std::vector<torch::Tensor> mine = pieces(relative, std::min(mask, p - relative));
      torch::Tensor incoming = torch::cat(mine);
      comm.recv(incoming, (relative - mask + root) % p);
      int64_t offset = 0;
      for (torch::Tensor& run : mine) {
        run.copy_(incoming.slice(0, offset, offset + run.numel()));
        offset += run.numel();
      }
      break;
    }
  for (mask /= 2; mask > 0; mask /= 2)
    if (relative + mask < p)
      comm.send(torch::cat(pieces(relative + mask, std::min(mask, p - relative - mask))), (relative + mask + root) % p);
  ch04::ring_all_gather(buffer, comm);
  // END SOLUTION
}

SimulatedRun simulate_collective(Collective collective, Algorithm algorithm, int ranks, int64_t count,
                                 const Link& link) {
  const bool ring = algorithm == Algorithm::Ring && collective != Collective::Broadcast;
  const bool all_reduce = collective == Collective::AllReduce &&
                          (algorithm == Algorithm::RecursiveDoubling || algorithm == Algorithm::Rabenseifner);
  const bool broadcast = collective == Collective::Broadcast &&
                         (algorithm == Algorithm::BinomialTree || algorithm == Algorithm::ScatterAllGather);
  WB_CHECK(ring || all_reduce || broadcast, "no program here for {} by {}", collective_name(collective),
           algorithm_name(algorithm));
  return simulate(ranks, link, [&](workbook::Communicator& comm) {
    torch::Tensor buffer = torch::ones({count});
    // Each segment travels whole: a chunk as long as the longest segment,
    // which is count / p rounded up where p does not divide count (a chunk of
    // count / p rounded down sent the longer segments in two messages).
    ch04::RingOptions whole_segments;
    whole_segments.chunk_elements = std::max<int64_t>(1, (count + ranks - 1) / ranks);
    switch (algorithm) {
      case Algorithm::Ring:
        if (collective == Collective::ReduceScatter) ch04::ring_reduce_scatter(buffer, comm, whole_segments);
        if (collective == Collective::AllGather) ch04::ring_all_gather(buffer, comm);
        if (collective == Collective::AllReduce) ch04::ring_all_reduce(buffer, workbook::ReduceOp::Sum, comm, whole_segments);
        break;
      case Algorithm::RecursiveDoubling: recursive_doubling_all_reduce(buffer, comm); break;
      case Algorithm::Rabenseifner: rabenseifner_all_reduce(buffer, comm); break;
      case Algorithm::BinomialTree: binomial_tree_broadcast(buffer, 0, comm); break;
      case Algorithm::ScatterAllGather: scatter_all_gather_broadcast(buffer, 0, comm); break;
    }
  });
}

}  // namespace ch10
