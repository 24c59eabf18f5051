// kiln fmt FILE.kir: parse, lint and print a program in canonical form.
#include <iostream>

#include "commands.h"
#include "kiln/ir/kir.h"

namespace kiln::tool {

void register_fmt(CLI::App& app) {
  add_command(app, "fmt", "Parse, lint and print a .kir program in canonical form",
              [](CLI::App& cmd) -> CommandFn {
                auto path = std::make_shared<std::string>();
                auto in_place = std::make_shared<bool>(false);
                auto check = std::make_shared<bool>(false);
                cmd.add_option("file", *path, "The .kir file")->required();
                cmd.add_flag("-i,--in-place", *in_place, "Rewrite the file instead of printing");
                cmd.add_flag("--check", *check,
                             "Print nothing; fail if the file is not in canonical form");
                return [=]() -> Status {
                  KILN_ASSIGN_OR_RETURN(std::string text, read_file(*path));
                  KILN_ASSIGN_OR_RETURN(ExportedProgram program, parse_kir(text, *path));
                  KILN_RETURN_IF_ERROR(program.lint().with_context(*path));
                  // Everything the file holds is printed again: values stay values, and only
                  // what the file gave by size stays by size.
                  std::string printed = print_kir(program);
                  if (*check) {
                    if (printed != text) return invalid_argument("{} is not in canonical form", *path);
                    return Status::Ok();
                  }
                  if (*in_place) return write_file_atomic(*path, printed);
                  std::cout << printed;
                  return Status::Ok();
                };
              });
}

}  // namespace kiln::tool
