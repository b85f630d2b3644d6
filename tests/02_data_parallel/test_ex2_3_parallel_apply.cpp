// Tests for ex2.3: parallel_apply, with replicas built here (not by replicate)
// and a spy model that records where and how its forward ran.
#include "catch2_compat.hpp"

#include "data_parallel.hpp"
#include "oracles.hpp"
#include "spy.hpp"
#include "workbook/errors.hpp"

using Catch::Matchers::ContainsSubstring;

using spy::as_classifiers;
using spy::cpus;
using spy::Rendezvous;
using spy::Spy;

TEST_CASE("ex2.3 parallel_apply returns each replica's output for its own input, in order", "[ex2.3]") {
  torch::manual_seed(31);
  workbook::TinyNet model(16, 0.0, /*batch_norm=*/false);
  std::vector<workbook::ClassifierPtr> replicas = {oracle::copy_of(model), oracle::copy_of(model),
                                                   oracle::copy_of(model)};
  std::vector<torch::Tensor> inputs = {torch::rand({4, 1, 28, 28}), torch::rand({3, 1, 28, 28}),
                                       torch::rand({2, 1, 28, 28})};
  std::vector<torch::Tensor> outputs = ch02::parallel_apply(replicas, inputs, cpus(3), 1);
  REQUIRE(outputs.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    REQUIRE(torch::allclose(outputs[i], model.forward(inputs[i]), 1e-5, 1e-6));
  }
}

TEST_CASE("ex2.3 every replica runs on its own thread, at the same time, with its share of threads", "[ex2.3]") {
  for (int threads_per_replica : {1, 2}) {
    CAPTURE(threads_per_replica);
    Rendezvous rendezvous;
    rendezvous.expected = 3;
    std::vector<std::shared_ptr<Spy>> spies;
    for (int i = 0; i < 3; ++i) spies.push_back(std::make_shared<Spy>(&rendezvous, false));
    std::vector<torch::Tensor> inputs(3, torch::rand({2, 1, 28, 28}));
    ch02::parallel_apply(as_classifiers(spies), inputs, cpus(3), threads_per_replica);
    for (size_t i = 0; i < 3; ++i) {
      CAPTURE(i);
      {
        INFO("replica forwards must run on threads of their own, not on the caller's");
        REQUIRE(spies[i]->last.thread != std::this_thread::get_id());
        for (size_t j = 0; j < i; ++j) REQUIRE(spies[i]->last.thread != spies[j]->last.thread);
      }
      {
        INFO("this replica's forward waited 5 s and in that time not every replica's forward had started: the "
             "replicas must run at the same time");
        REQUIRE(spies[i]->last.met_the_others);
      }
      INFO("the replica's forward ran with " << spies[i]->last.intra_op_threads
           << " intra-op thread(s); the contract: threads_per_replica in each replica's forward");
      REQUIRE(spies[i]->last.intra_op_threads == threads_per_replica);
    }
  }
}

TEST_CASE("ex2.3 the replicas run under the caller's autograd mode", "[ex2.3]") {
  std::vector<std::shared_ptr<Spy>> spies = {std::make_shared<Spy>(nullptr, false), std::make_shared<Spy>(nullptr, false)};
  std::vector<torch::Tensor> inputs(2, torch::rand({2, 1, 28, 28}));
  {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> outputs = ch02::parallel_apply(as_classifiers(spies), inputs, cpus(2), 1);
    for (size_t i = 0; i < 2; ++i) {
      CAPTURE(i);
      INFO("the caller disabled gradients (NoGradGuard), and the replica's forward ran with gradients enabled or "
           "returned an output that requires grad: the replicas must run under the caller's autograd mode");
      REQUIRE_FALSE(spies[i]->last.grad_enabled);
      REQUIRE_FALSE(outputs[i].requires_grad());
    }
  }
  std::vector<torch::Tensor> outputs = ch02::parallel_apply(as_classifiers(spies), inputs, cpus(2), 1);
  for (size_t i = 0; i < 2; ++i) {
    REQUIRE(spies[i]->last.grad_enabled);
    REQUIRE(outputs[i].requires_grad());
  }
}

TEST_CASE("ex2.3 an exception in a replica becomes an error that names the replica", "[ex2.3]") {
  std::vector<torch::Tensor> inputs(3, torch::rand({2, 1, 28, 28}));
  std::vector<std::shared_ptr<Spy>> one_fails = {std::make_shared<Spy>(nullptr, false),
                                                 std::make_shared<Spy>(nullptr, true),
                                                 std::make_shared<Spy>(nullptr, false)};
  REQUIRE_THROWS_WITH(ch02::parallel_apply(as_classifiers(one_fails), inputs, cpus(3), 1),
                      ContainsSubstring("replica 1") && ContainsSubstring("spy was told to fail"));
  INFO("when several fail, the message names the first of them by index");
  std::vector<std::shared_ptr<Spy>> two_fail = {std::make_shared<Spy>(nullptr, false),
                                                std::make_shared<Spy>(nullptr, true),
                                                std::make_shared<Spy>(nullptr, true)};
  REQUIRE_THROWS_WITH(ch02::parallel_apply(as_classifiers(two_fail), inputs, cpus(3), 1),
                      ContainsSubstring("replica 1"));
  INFO("after an error parallel_apply must still work (no thread left running)");
  std::vector<std::shared_ptr<Spy>> fine = {std::make_shared<Spy>(nullptr, false),
                                            std::make_shared<Spy>(nullptr, false),
                                            std::make_shared<Spy>(nullptr, false)};
  REQUIRE(ch02::parallel_apply(as_classifiers(fine), inputs, cpus(3), 1).size() == 3);
}

TEST_CASE("ex2.3 parallel_apply rejects lists of different lengths", "[ex2.3]") {
  std::vector<std::shared_ptr<Spy>> spies = {std::make_shared<Spy>(nullptr, false), std::make_shared<Spy>(nullptr, false)};
  std::vector<torch::Tensor> three_inputs(3, torch::rand({2, 1, 28, 28}));
  REQUIRE_THROWS_AS(ch02::parallel_apply(as_classifiers(spies), three_inputs, cpus(2), 1),
                    workbook::UserError);
  REQUIRE_THROWS_AS(ch02::parallel_apply(as_classifiers(spies), {three_inputs[0], three_inputs[1]}, {torch::kCPU}, 1),
                    workbook::UserError);
}
