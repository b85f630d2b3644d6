// fmt_compiled.cpp — the compiled part of the fmt inside LibTorch's include
// folder (Note [fmt compiled once] in WorkbookTorch.cmake): the functions that
// fmt's headers declare and a header-only build would define inline in every
// file, and the instantiations that fmt/format.h declares extern (and
// dragonbox::to_decimal, which it declares and leaves to the library).
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {
template FMT_API auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template FMT_API auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;
template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<wchar_t>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;
template FMT_API auto decimal_point_impl(locale_ref) -> wchar_t;
}  // namespace detail
template FMT_API auto locale_ref::get<std::locale>() const -> std::locale;
FMT_END_NAMESPACE
