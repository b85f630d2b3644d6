// pch_vtables.hpp — the virtual functions LibTorch's headers need, instantiated
// once in the precompiled header instead of again in every file.
//
// Note: [the header's vtables] LibTorch's headers define constructors inline,
// so every file "uses" the vtables of the class templates they construct
// (Cloneable<Conv2dImpl>, SingleElementType<ListType>, ...). Clang defines a
// used vtable, instantiating every virtual function in it, at the end of each
// file that includes the header, and not in the precompiled header itself:
// -fpch-instantiate-templates performs the header's pending instantiations,
// not its vtables. That was 4.4 of the 4.8 s an empty file took at -O0 with
// LibTorch 2.15, in every file of the build. Clang marks a local class's
// virtual functions used where the class is defined, though, so deriving a
// local class from each class below instantiates their virtual functions
// here, once; a file then emits only those it needs. The functions below are
// never called. An empty file now takes about 0.5 s. The list is what an
// empty file still instantiated (`python3 cmake/pch_vtables.py build/default`
// prints what it still does): a class it misses costs time, never
// correctness; a class a newer LibTorch drops stops this header compiling, and
// leaves the list. With Debian 13's LibTorch 2.6 an empty file still spends
// about 1 s on libstdc++ 14's std::format sink (_Seq_sink), a final class,
// which no local class can derive from.
#pragma once
#if defined(__clang__)
#include <torch/torch.h>

namespace workbook::pch_vtables {

template <class Base>
void define_vtable() {
  struct Derived : Base {
    ~Derived() override {}
  };
}

template <class... Bases>
void define_vtables() {
  (define_vtable<Bases>(), ...);
}

inline void define_all() {
  define_vtables<
    c10::EnumerationType<c10::TypeKind::LayoutType>,
    c10::EnumerationType<c10::TypeKind::MemoryFormatType>,
    c10::EnumerationType<c10::TypeKind::ScalarTypeType>,
    c10::SingleElementType<c10::TypeKind::AwaitType, c10::AwaitType>,
    c10::SingleElementType<c10::TypeKind::FutureType, c10::FutureType>,
    c10::SingleElementType<c10::TypeKind::ListType, c10::ListType>,
    c10::SingleElementType<c10::TypeKind::RRefType, c10::RRefType>,
    torch::jit::ScalarAttributeValue<c10::complex<double>, torch::jit::AttributeKind::c>,
    torch::jit::ScalarAttributeValue<double, torch::jit::AttributeKind::f>,
    torch::jit::ScalarAttributeValue<long, torch::jit::AttributeKind::i>,
    torch::jit::ScalarAttributeValue<std::string, torch::jit::AttributeKind::s>,
    torch::jit::VectorAttributeValue<at::Tensor, torch::jit::AttributeKind::ts>,
    torch::jit::VectorAttributeValue<c10::Type::SingletonOrSharedTypePtr<c10::Type>, torch::jit::AttributeKind::tys>,
    torch::jit::VectorAttributeValue<c10::complex<double>, torch::jit::AttributeKind::cs>,
    torch::jit::VectorAttributeValue<double, torch::jit::AttributeKind::fs>,
    torch::jit::VectorAttributeValue<long, torch::jit::AttributeKind::is>,
    torch::jit::VectorAttributeValue<std::string, torch::jit::AttributeKind::ss>,
    torch::data::datasets::Dataset<torch::data::datasets::MNIST>,
    torch::data::datasets::Dataset<torch::data::datasets::TensorDataset, torch::data::Example<at::Tensor, void>>,
    torch::nn::ConvNdImpl<1, torch::nn::Conv1dImpl>,
    torch::nn::ConvNdImpl<1, torch::nn::ConvTranspose1dImpl>,
    torch::nn::ConvNdImpl<2, torch::nn::Conv2dImpl>,
    torch::nn::ConvNdImpl<2, torch::nn::ConvTranspose2dImpl>,
    torch::nn::ConvNdImpl<3, torch::nn::Conv3dImpl>,
    torch::nn::ConvNdImpl<3, torch::nn::ConvTranspose3dImpl>,
    torch::nn::ConvTransposeNdImpl<1, torch::nn::ConvTranspose1dImpl>,
    torch::nn::ConvTransposeNdImpl<2, torch::nn::ConvTranspose2dImpl>,
    torch::nn::ConvTransposeNdImpl<3, torch::nn::ConvTranspose3dImpl>,
    torch::nn::Cloneable<torch::nn::AdaptiveLogSoftmaxWithLossImpl>,
    torch::nn::Cloneable<torch::nn::BilinearImpl>,
    torch::nn::Cloneable<torch::nn::Conv1dImpl>,
    torch::nn::Cloneable<torch::nn::Conv2dImpl>,
    torch::nn::Cloneable<torch::nn::Conv3dImpl>,
    torch::nn::Cloneable<torch::nn::ConvTranspose1dImpl>,
    torch::nn::Cloneable<torch::nn::ConvTranspose2dImpl>,
    torch::nn::Cloneable<torch::nn::ConvTranspose3dImpl>,
    torch::nn::Cloneable<torch::nn::CrossMapLRN2dImpl>,
    torch::nn::Cloneable<torch::nn::EmbeddingBagImpl>,
    torch::nn::Cloneable<torch::nn::EmbeddingImpl>,
    torch::nn::Cloneable<torch::nn::FoldImpl>,
    torch::nn::Cloneable<torch::nn::FractionalMaxPool2dImpl>,
    torch::nn::Cloneable<torch::nn::FractionalMaxPool3dImpl>,
    torch::nn::Cloneable<torch::nn::GRUCellImpl>,
    torch::nn::Cloneable<torch::nn::GRUImpl>,
    torch::nn::Cloneable<torch::nn::GroupNormImpl>,
    torch::nn::Cloneable<torch::nn::LSTMCellImpl>,
    torch::nn::Cloneable<torch::nn::LSTMImpl>,
    torch::nn::Cloneable<torch::nn::LayerNormImpl>,
    torch::nn::Cloneable<torch::nn::LinearImpl>,
    torch::nn::Cloneable<torch::nn::LocalResponseNormImpl>,
    torch::nn::Cloneable<torch::nn::LogSoftmaxImpl>,
    torch::nn::Cloneable<torch::nn::ModuleDictImpl>,
    torch::nn::Cloneable<torch::nn::MultiheadAttentionImpl>,
    torch::nn::Cloneable<torch::nn::ParameterDictImpl>,
    torch::nn::Cloneable<torch::nn::RNNCellImpl>,
    torch::nn::Cloneable<torch::nn::RNNImpl>,
    torch::nn::Cloneable<torch::nn::SequentialImpl>,
    torch::nn::Cloneable<torch::nn::SoftmaxImpl>,
    torch::nn::Cloneable<torch::nn::SoftminImpl>,
    torch::nn::Cloneable<torch::nn::ThresholdImpl>,
    torch::nn::Cloneable<torch::nn::TransformerDecoderImpl>,
    torch::nn::Cloneable<torch::nn::TransformerDecoderLayerImpl>,
    torch::nn::Cloneable<torch::nn::TransformerEncoderImpl>,
    torch::nn::Cloneable<torch::nn::TransformerEncoderLayerImpl>,
    torch::nn::Cloneable<torch::nn::UnflattenImpl>,
    torch::nn::Cloneable<torch::nn::UnfoldImpl>,
    torch::optim::OptimizerCloneableOptions<torch::optim::AdagradOptions>,
    torch::optim::OptimizerCloneableOptions<torch::optim::AdamOptions>,
    torch::optim::OptimizerCloneableOptions<torch::optim::AdamWOptions>,
    torch::optim::OptimizerCloneableOptions<torch::optim::LBFGSOptions>,
    torch::optim::OptimizerCloneableOptions<torch::optim::RMSpropOptions>,
    torch::optim::OptimizerCloneableOptions<torch::optim::SGDOptions>,
    torch::optim::OptimizerCloneableParamState<torch::optim::AdagradParamState>,
    torch::optim::OptimizerCloneableParamState<torch::optim::AdamParamState>,
    torch::optim::OptimizerCloneableParamState<torch::optim::AdamWParamState>,
    torch::optim::OptimizerCloneableParamState<torch::optim::LBFGSParamState>,
    torch::optim::OptimizerCloneableParamState<torch::optim::RMSpropParamState>,
    torch::optim::OptimizerCloneableParamState<torch::optim::SGDParamState>>();
}

}  // namespace workbook::pch_vtables
#endif
