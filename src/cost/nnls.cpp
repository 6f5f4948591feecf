// The fit's numerics: non-negative least squares and the design's condition
// number. The designs are small (tens of cases, tens of terms), so plain
// dense algorithms do.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

#include "mmlab/cost.h"

namespace mmlab::cost {
namespace {

using Matrix = std::vector<double>;  // row-major

// Least squares over the columns in `set` (unconstrained), by modified
// Gram-Schmidt QR: returns the coefficients of those columns, in order.
std::vector<double> least_squares(const Matrix& a, size_t rows, size_t cols, const std::vector<double>& b,
                                  const std::vector<size_t>& set) {
  const size_t k = set.size();
  std::vector<std::vector<double>> q(k, std::vector<double>(rows));
  std::vector<double> r(k * k, 0.0);
  for (size_t j = 0; j < k; j++) {
    for (size_t i = 0; i < rows; i++) q[j][i] = a[i * cols + set[j]];
    for (size_t p = 0; p < j; p++) {
      double d = 0;
      for (size_t i = 0; i < rows; i++) d += q[p][i] * q[j][i];
      r[p * k + j] = d;
      for (size_t i = 0; i < rows; i++) q[j][i] -= d * q[p][i];
    }
    double nrm = 0;
    for (double v : q[j]) nrm += v * v;
    nrm = std::sqrt(nrm);
    // The columns come scaled to about unit length: a remainder this small
    // is a column dependent on the ones before it, which takes no weight.
    if (nrm < 1e-9) nrm = 0;
    r[j * k + j] = nrm;
    if (nrm > 0)
      for (double& v : q[j]) v /= nrm;
  }
  std::vector<double> qtb(k, 0.0), x(k, 0.0);
  for (size_t j = 0; j < k; j++)
    for (size_t i = 0; i < rows; i++) qtb[j] += q[j][i] * b[i];
  for (size_t jj = k; jj-- > 0;) {
    double s = qtb[jj];
    for (size_t p = jj + 1; p < k; p++) s -= r[jj * k + p] * x[p];
    x[jj] = r[jj * k + jj] > 0 ? s / r[jj * k + jj] : 0.0;
  }
  return x;
}

// Eigenvalues of a symmetric n x n matrix (cyclic Jacobi rotations).
std::vector<double> symmetric_eigenvalues(Matrix m, size_t n) {
  for (int sweep = 0; sweep < 100; sweep++) {
    double off = 0;
    for (size_t p = 0; p < n; p++)
      for (size_t q = p + 1; q < n; q++) off += m[p * n + q] * m[p * n + q];
    if (off < 1e-30) break;
    for (size_t p = 0; p < n; p++) {
      for (size_t q = p + 1; q < n; q++) {
        const double apq = m[p * n + q];
        if (std::abs(apq) < 1e-300) continue;
        const double theta = (m[q * n + q] - m[p * n + p]) / (2 * apq);
        const double t = (theta >= 0 ? 1.0 : -1.0) / (std::abs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (size_t k = 0; k < n; k++) {
          const double mkp = m[k * n + p], mkq = m[k * n + q];
          m[k * n + p] = c * mkp - s * mkq;
          m[k * n + q] = s * mkp + c * mkq;
        }
        for (size_t k = 0; k < n; k++) {
          const double mpk = m[p * n + k], mqk = m[q * n + k];
          m[p * n + k] = c * mpk - s * mqk;
          m[q * n + k] = s * mpk + c * mqk;
        }
      }
    }
  }
  std::vector<double> ev(n);
  for (size_t i = 0; i < n; i++) ev[i] = m[i * n + i];
  return ev;
}

}  // namespace

std::vector<double> nnls(const std::vector<double>& a, size_t rows, size_t cols, const std::vector<double>& b) {
  assert(a.size() == rows * cols && b.size() == rows);
  std::vector<double> x(cols, 0.0);
  std::vector<bool> passive(cols, false);
  const double tol = 1e-12;
  auto gradient = [&] {
    std::vector<double> w(cols, 0.0);
    for (size_t i = 0; i < rows; i++) {
      double r = b[i];
      for (size_t j = 0; j < cols; j++) r -= a[i * cols + j] * x[j];
      for (size_t j = 0; j < cols; j++) w[j] += a[i * cols + j] * r;
    }
    return w;
  };
  for (size_t outer = 0; outer < 3 * cols + 10; outer++) {
    std::vector<double> w = gradient();
    size_t best = cols;
    for (size_t j = 0; j < cols; j++)
      if (!passive[j] && w[j] > tol && (best == cols || w[j] > w[best])) best = j;
    if (best == cols) break;
    passive[best] = true;
    for (size_t inner = 0; inner < 3 * cols + 10; inner++) {
      std::vector<size_t> set;
      for (size_t j = 0; j < cols; j++)
        if (passive[j]) set.push_back(j);
      std::vector<double> z = least_squares(a, rows, cols, b, set);
      bool feasible = true;
      for (double v : z) feasible &= v > 0;
      if (feasible) {
        std::fill(x.begin(), x.end(), 0.0);
        for (size_t k = 0; k < set.size(); k++) x[set[k]] = z[k];
        break;
      }
      // Step from x toward z as far as stays non-negative, and drop the
      // columns that reach zero.
      double alpha = 1.0;
      for (size_t k = 0; k < set.size(); k++)
        if (z[k] <= 0) alpha = std::min(alpha, x[set[k]] / (x[set[k]] - z[k]));
      for (size_t k = 0; k < set.size(); k++) {
        x[set[k]] += alpha * (z[k] - x[set[k]]);
        if (x[set[k]] <= tol) {
          x[set[k]] = 0;
          passive[set[k]] = false;
        }
      }
    }
  }
  return x;
}

double condition_number(const std::vector<double>& a, size_t rows, size_t cols) {
  if (cols == 0) return 1.0;
  std::vector<double> norm(cols, 0.0);
  for (size_t i = 0; i < rows; i++)
    for (size_t j = 0; j < cols; j++) norm[j] += a[i * cols + j] * a[i * cols + j];
  Matrix ata(cols * cols, 0.0);
  for (size_t p = 0; p < cols; p++)
    for (size_t q = 0; q < cols; q++) {
      if (norm[p] == 0 || norm[q] == 0) continue;
      double d = 0;
      for (size_t i = 0; i < rows; i++) d += a[i * cols + p] * a[i * cols + q];
      ata[p * cols + q] = d / std::sqrt(norm[p] * norm[q]);
    }
  std::vector<double> ev = symmetric_eigenvalues(ata, cols);
  const double hi = *std::max_element(ev.begin(), ev.end()), lo = *std::min_element(ev.begin(), ev.end());
  if (lo <= hi * 1e-15) return std::numeric_limits<double>::infinity();
  return std::sqrt(hi / lo);
}

}  // namespace mmlab::cost
