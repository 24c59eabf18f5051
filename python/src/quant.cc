// Post-training quantization from Python, in torch's pt2e shape: a QnnQuantizer says how
// (8a8w, 16a8w, 16a4w, 16a16w; per channel or per tensor; the activation observer), prepare_pt2e
// places observers, calling the prepared model calibrates, convert_pt2e gives the QDQ program.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common.h"
#include "kiln/quant/quantizer.h"
#include "kiln/quant/report.h"
#include "quant.h"

namespace kiln::python {
namespace {

// ExecuTorch's QuantDtype, by kiln configuration name.
enum class QuantDtype { use_16a16w, use_16a8w, use_16a4w, use_8a8w };

std::string_view config_name(QuantDtype d) {
  switch (d) {
    case QuantDtype::use_16a16w: return "16a16w";
    case QuantDtype::use_16a8w: return "16a8w";
    case QuantDtype::use_16a4w: return "16a4w";
    case QuantDtype::use_8a8w: return "8a8w";
  }
  return "8a8w";
}

// kiln observer names, and the names of torch's observer classes ExecuTorch scripts pass.
quant::ObserverKind observer_kind(const py::object& observer) {
  std::string name = py::isinstance<py::str>(observer) ? observer.cast<std::string>()
                                                       : py::str(observer.attr("__name__")).cast<std::string>();
  if (name == "MinMaxObserver" || name == "PerChannelMinMaxObserver") name = "minmax";
  if (name == "MovingAverageMinMaxObserver" || name == "MovingAveragePerChannelMinMaxObserver") name = "moving-average";
  if (name == "HistogramObserver") name = "histogram";
  auto kind = quant::observer_from_name(name);
  if (!kind) {
    throw py::value_error(fmt::format("act_observer '{}': expected 'minmax', 'moving-average', 'histogram' or one of "
                                      "torch's MinMaxObserver, MovingAverageMinMaxObserver, HistogramObserver", name));
  }
  return *kind;
}

void set_default_quant_config(QnnQuantizer& q, QuantDtype dtype, bool is_qat, bool is_conv_per_channel,
                              bool is_linear_per_channel, const py::object& act_observer, bool full_range_weights) {
  if (is_qat) {
    raise(unsupported(
        "set_default_quant_config: is_qat=True asks for quantization-aware training; kiln quantizes after training "
        "(calibration), so quantize the trained float model with is_qat=False"));
  }
  if (is_conv_per_channel != is_linear_per_channel) {
    throw py::value_error(fmt::format(
        "set_default_quant_config: is_conv_per_channel={} but is_linear_per_channel={}: kiln quantizes conv and "
        "linear weights the same way; set both", is_conv_per_channel, is_linear_per_channel));
  }
  std::optional<quant::ObserverKind> observer;
  if (!act_observer.is_none()) observer = observer_kind(act_observer);
  q.options.config =
      unwrap(quant::make_config(config_name(dtype), !is_conv_per_channel, observer, full_range_weights));
}

// One calibration sample from positional and named arrays (inputs not given are left out:
// calibrate names them).
quant::Sample make_sample(const ExportedProgram& p, const py::args& args, const py::kwargs& kwargs, int64_t index) {
  const std::vector<std::string> names = p.user_input_names();
  const std::vector<Node*> inputs = p.user_inputs();
  std::vector<std::optional<py::array>> given = bind_arrays(names, args, kwargs, "the prepared model");
  quant::Sample sample;
  sample.source = fmt::format("call {}", index);
  for (size_t i = 0; i < names.size(); ++i) {
    if (!given[i]) continue;
    const std::string what = fmt::format("input '{}'", names[i]);
    sample.inputs.emplace(names[i], inputs[i]->has_spec() ? to_tensor(*given[i], inputs[i]->spec().dtype, what)
                                                          : to_tensor(*given[i], what));
  }
  return sample;
}

quant::PreparedModel& model_of(PreparedRef& r) {
  if (r.model == nullptr || (r.alive && !*r.alive)) {
    raise(invalid_argument("this prepared model belonged to a calibration callback that has returned; it is gone"));
  }
  return *r.model;
}

}  // namespace

PreparedRef PreparedRef::borrow(quant::PreparedModel& model, std::shared_ptr<bool> alive) {
  PreparedRef r;
  r.model = &model;
  r.alive = std::move(alive);
  return r;
}

void bind_quant(py::module_& m) {
  py::enum_<QuantDtype>(m, "QuantDtype", "Quantization configurations: activation bits x weight bits.")
      .value("use_16a16w", QuantDtype::use_16a16w)
      .value("use_16a8w", QuantDtype::use_16a8w)
      .value("use_16a4w", QuantDtype::use_16a4w)
      .value("use_8a8w", QuantDtype::use_8a8w);

  py::class_<QnnQuantizer>(
      m, "QnnQuantizer",
      "How a program is quantized (ExecuTorch's QnnQuantizer): the default configuration\n"
      "(8a8w per channel, moving-average observers), per-layer configurations, and the nodes\n"
      "and ops left in floating point.")
      .def(py::init([] {
        QnnQuantizer q;
        q.options.config = unwrap(quant::make_config("8a8w"));
        return q;
      }))
      .def("set_default_quant_config", &set_default_quant_config, py::arg("quant_dtype"), py::arg("is_qat") = false,
           py::arg("is_conv_per_channel") = true, py::arg("is_linear_per_channel") = true,
           py::arg("act_observer") = py::none(), py::arg("full_range_weights") = false,
           "Sets the configuration of every layer. act_observer: 'minmax', 'moving-average',\n"
           "'histogram' or torch's observer class of that kind. full_range_weights adds the most\n"
           "negative code to the weights' range ([-128, 127] instead of [-127, 127]).")
      .def(
          "set_layer_config",
          [](QnnQuantizer& q, const std::string& layer, QuantDtype dtype) {
            quant::QuantConfig c = q.options.config;
            quant::QuantConfig named = unwrap(quant::make_config(
                config_name(dtype), c.weight.qscheme != quant::QScheme::kPerChannelSymmetric, c.activation.observer));
            q.options.layer_configs[layer] = named;
          },
          py::arg("layer"), py::arg("quant_dtype"),
          "Quantizes the layer named `layer` (a node name) with another configuration (mixed precision).")
      .def(
          "add_discard_nodes",
          [](QnnQuantizer& q, const std::vector<std::string>& names) {
            q.options.skip_nodes.insert(q.options.skip_nodes.end(), names.begin(), names.end());
          },
          py::arg("nodes"), "Leaves the nodes of these names in floating point.")
      .def(
          "add_discard_ops",
          [](QnnQuantizer& q, const std::vector<std::string>& ops) {
            q.options.skip_ops.insert(q.options.skip_ops.end(), ops.begin(), ops.end());
          },
          py::arg("ops"), "Leaves every node of these ops (\"softmax\") in floating point.")
      .def_property_readonly("quant_dtype", [](const QnnQuantizer& q) { return q.options.config.name; },
                             "The default configuration's name (\"8a8w\").")
      .def("__repr__", [](const QnnQuantizer& q) {
        const quant::QuantConfig& c = q.options.config;
        return fmt::format("<kiln.QnnQuantizer {}: activations {}, weights {}, {} layer override(s), discard nodes [{}], "
                           "ops [{}]>", c.name, c.activation.to_string(), c.weight.to_string(),
                           q.options.layer_configs.size(), fmt::join(q.options.skip_nodes, ", "),
                           fmt::join(q.options.skip_ops, ", "));
      });

  py::class_<PreparedRef>(
      m, "PreparedModel",
      "A program with an observer on every quantized tensor (prepare_pt2e's result). Call it\n"
      "with one calibration sample (numpy arrays, positional or by input name) for each sample;\n"
      "then convert_pt2e.")
      .def(
          "__call__",
          [](PreparedRef& r, const py::args& args, const py::kwargs& kwargs) {
            quant::PreparedModel& model = model_of(r);
            quant::Sample sample = make_sample(model.float_program(), args, kwargs, model.samples());
            Status s;
            {
              py::gil_scoped_release nogil;
              s = quant::calibrate(model, std::span(&sample, 1), r.num_threads);
            }
            sample.inputs.clear();  // release the callers' arrays with the GIL held
            check(s);
          },
          "Runs the float program on one sample; every observer sees its tensors.")
      .def_property_readonly("samples", [](PreparedRef& r) { return model_of(r).samples(); },
                             "How many samples were calibrated.")
      .def_property_readonly(
          "input_names", [](PreparedRef& r) { return model_of(r).float_program().user_input_names(); },
          "The inputs a sample gives, in signature order.")
      .def_property_readonly(
          "layers",
          [](PreparedRef& r) {
            std::vector<std::string> out;
            for (const Node* n : model_of(r).layers()) out.push_back(n->name());
            return out;
          },
          "The quantized layers (node names), in graph order.")
      .def_readwrite("num_threads", &PreparedRef::num_threads, "Threads of the calibration runs (1).")
      .def("__repr__", [](PreparedRef& r) {
        if (r.alive && !*r.alive) return std::string("<kiln.PreparedModel (released)>");
        return fmt::format("<kiln.PreparedModel {}: {} layer(s), {} observer group(s), {} sample(s) calibrated>",
                           r.model->options().config.name, r.model->layers().size(), r.model->groups().size(),
                           r.model->samples());
      });

  m.def(
      "prepare_pt2e",
      [](const ExportedProgram& program, const QnnQuantizer& quantizer) {
        std::unique_ptr<quant::PreparedModel> model;
        {
          py::gil_scoped_release nogil;
          auto r = quant::prepare(program, quantizer.options);
          py::gil_scoped_acquire gil;
          model = unwrap(std::move(r));
        }
        PreparedRef ref;
        ref.owned = std::shared_ptr<quant::PreparedModel>(std::move(model));
        ref.model = ref.owned.get();
        return ref;
      },
      py::arg("program"), py::arg("quantizer"),
      "Annotates a copy of `program` as `quantizer` says and places the observers (torch's\n"
      "prepare_pt2e). Unknown discard nodes / ops and layer names are errors naming them.");
  m.def(
      "convert_pt2e",
      [](PreparedRef& r) {
        quant::PreparedModel& model = model_of(r);
        py::gil_scoped_release nogil;
        auto out = quant::convert(model);
        py::gil_scoped_acquire gil;
        return std::make_shared<ExportedProgram>(unwrap(std::move(out)));
      },
      py::arg("prepared"),
      "The quantized program (torch's convert_pt2e): quantize / dequantize pairs with the\n"
      "calibrated parameters, integer weights and biases. Errors if a tensor was never observed.");
  m.def(
      "accuracy_report",
      [](PreparedRef& r, const ExportedProgram& quantized, const std::vector<py::dict>& feeds, size_t max_layers) {
        quant::PreparedModel& model = model_of(r);
        std::vector<quant::Sample> samples;
        for (const py::dict& feed : feeds) {
          samples.push_back(make_sample(model.float_program(), py::args(), py::kwargs(feed),
                                        static_cast<int64_t>(samples.size())));
        }
        Result<quant::AccuracyReport> report = [&] {
          py::gil_scoped_release nogil;
          return quant::measure_accuracy(model, quantized, samples, r.num_threads);
        }();
        samples.clear();
        return quant::format_report(unwrap(std::move(report)), max_layers);
      },
      py::arg("prepared"), py::arg("quantized"), py::arg("feeds"), py::arg("max_layers") = 20,
      "The accuracy table (SQNR per output and of the worst layers, quantized against float) on\n"
      "`feeds` ({input name: array} each), as `kiln compile --quant` prints it.");
}

}  // namespace kiln::python
