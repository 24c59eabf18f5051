// SmallVec: a vector that keeps up to N elements inline and only allocates beyond that. Shapes
// and a node's output specs are almost always short; keeping them inline saves two heap
// allocations per node, which is most of the cost of building a large graph.
//
// The interface is the subset of std::vector that kiln uses, plus implicit conversions to and
// from std::vector so code that builds a std::vector can assign it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "kiln/core/status.h"

namespace kiln {

template <typename T, size_t N>
class SmallVec {
  static_assert(N > 0);

 public:
  using value_type = T;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;
  using reverse_iterator = std::reverse_iterator<T*>;
  using const_reverse_iterator = std::reverse_iterator<const T*>;

  SmallVec() = default;
  SmallVec(std::initializer_list<T> init) { assign(init.begin(), init.end()); }
  explicit SmallVec(size_t n, const T& value = T()) { assign(n, value); }
  template <typename It, typename = typename std::iterator_traits<It>::iterator_category>
  SmallVec(It first, It last) { assign(first, last); }
  SmallVec(const std::vector<T>& v) { assign(v.begin(), v.end()); }  // NOLINT: implicit
  SmallVec(std::vector<T>&& v) {                                     // NOLINT: implicit
    assign(std::make_move_iterator(v.begin()), std::make_move_iterator(v.end()));
  }
  SmallVec(const SmallVec& o) { assign(o.begin(), o.end()); }
  SmallVec(SmallVec&& o) noexcept { take(std::move(o)); }
  ~SmallVec() { release(); }

  SmallVec& operator=(const SmallVec& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  SmallVec& operator=(SmallVec&& o) noexcept {
    if (this != &o) {
      release();
      take(std::move(o));
    }
    return *this;
  }
  SmallVec& operator=(std::initializer_list<T> init) {
    assign(init.begin(), init.end());
    return *this;
  }

  operator std::vector<T>() const { return std::vector<T>(begin(), end()); }  // NOLINT

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return cap_; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T& at(size_t i) { KILN_CHECK(i < size_); return data_[i]; }
  const T& at(size_t i) const { KILN_CHECK(i < size_); return data_[i]; }
  T& front() { return data_[0]; }
  const T& front() const { return data_[0]; }
  T& back() { return data_[size_ - 1]; }
  const T& back() const { return data_[size_ - 1]; }

  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  const T* cbegin() const { return data_; }
  const T* cend() const { return data_ + size_; }
  reverse_iterator rbegin() { return reverse_iterator(end()); }
  reverse_iterator rend() { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const { return const_reverse_iterator(begin()); }

  void reserve(size_t n) {
    if (n > cap_) grow_to(n);
  }
  void clear() {
    std::destroy(begin(), end());
    size_ = 0;
  }
  template <typename... A>
  T& emplace_back(A&&... a) {
    if (size_ == cap_) grow_to(cap_ * 2);
    T* p = ::new (static_cast<void*>(data_ + size_)) T(std::forward<A>(a)...);
    ++size_;
    return *p;
  }
  void push_back(const T& v) { emplace_back(v); }
  void push_back(T&& v) { emplace_back(std::move(v)); }
  void pop_back() { data_[--size_].~T(); }

  void resize(size_t n) { resize_with(n, [](T* p) { ::new (static_cast<void*>(p)) T(); }); }
  void resize(size_t n, const T& v) {
    resize_with(n, [&](T* p) { ::new (static_cast<void*>(p)) T(v); });
  }

  template <typename It, typename = typename std::iterator_traits<It>::iterator_category>
  void assign(It first, It last) {
    clear();
    if constexpr (std::is_base_of_v<std::forward_iterator_tag,
                                    typename std::iterator_traits<It>::iterator_category>) {
      reserve(static_cast<size_t>(std::distance(first, last)));
    }
    for (; first != last; ++first) emplace_back(*first);
  }
  void assign(size_t n, const T& v) {
    clear();
    reserve(n);
    for (size_t i = 0; i < n; ++i) emplace_back(v);
  }

  T* insert(const T* pos, const T& v) { return insert(pos, &v, &v + 1); }
  T* insert(const T* pos, size_t n, const T& v) {
    std::vector<T> copies(n, v);
    return insert(pos, copies.begin(), copies.end());
  }
  T* insert(const T* pos, std::initializer_list<T> init) {
    return insert(pos, init.begin(), init.end());
  }
  /// Inserts [first, last) before `pos`. The range may alias this vector.
  template <typename It, typename = typename std::iterator_traits<It>::iterator_category>
  T* insert(const T* pos, It first, It last) {
    size_t at = static_cast<size_t>(pos - data_);
    std::vector<T> items(first, last);  // copied first: growing would invalidate an alias
    size_t old = size_;
    for (T& item : items) emplace_back(std::move(item));  // append, then rotate into place
    std::rotate(data_ + at, data_ + old, data_ + size_);
    return data_ + at;
  }
  T* erase(const T* pos) { return erase(pos, pos + 1); }
  T* erase(const T* first, const T* last) {
    T* f = data_ + (first - data_);
    T* l = data_ + (last - data_);
    T* new_end = std::move(l, end(), f);
    std::destroy(new_end, end());
    size_ -= static_cast<uint32_t>(l - f);
    return f;
  }

  friend bool operator==(const SmallVec& a, const SmallVec& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator!=(const SmallVec& a, const SmallVec& b) { return !(a == b); }

 private:
  T* inline_data() { return std::launder(reinterpret_cast<T*>(buf_)); }
  bool is_inline() const { return data_ == reinterpret_cast<const T*>(buf_); }

  template <typename Make>
  void resize_with(size_t n, Make make) {
    if (n < size_) {
      std::destroy(data_ + n, end());
    } else {
      reserve(n);
      for (size_t i = size_; i < n; ++i) make(data_ + i);
    }
    size_ = static_cast<uint32_t>(n);
  }
  void grow_to(size_t n) {
    n = std::max<size_t>(n, N);
    T* fresh = static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{alignof(T)}));
    std::uninitialized_move(begin(), end(), fresh);
    std::destroy(begin(), end());
    if (!is_inline()) ::operator delete(data_, std::align_val_t{alignof(T)});
    data_ = fresh;
    cap_ = static_cast<uint32_t>(n);
  }
  void release() {
    std::destroy(begin(), end());
    if (!is_inline()) ::operator delete(data_, std::align_val_t{alignof(T)});
    data_ = inline_data();
    size_ = 0;
    cap_ = N;
  }
  // Leaves `o` empty and inline; `this` must be released already.
  void take(SmallVec&& o) {
    if (o.is_inline()) {
      data_ = inline_data();
      std::uninitialized_move(o.begin(), o.end(), data_);
      size_ = o.size_;
      cap_ = N;
      o.clear();
    } else {
      data_ = o.data_;
      size_ = o.size_;
      cap_ = o.cap_;
      o.data_ = o.inline_data();
      o.size_ = 0;
      o.cap_ = N;
    }
  }

  T* data_ = inline_data();
  uint32_t size_ = 0;
  uint32_t cap_ = N;
  alignas(T) unsigned char buf_[N * sizeof(T)];
};

}  // namespace kiln
