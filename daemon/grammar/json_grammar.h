// JSON as a grammar (RFC 8259): what OpenAI's response_format json_object
// and Ollama's format "json" hold a generation to. The top level is an
// object, as both APIs ask; whitespace between tokens is bounded, so a
// model cannot stall in an endless run of spaces; and numbers stay within
// a double's range (16 digits, exponents of two), so every parser reads them.
#pragma once

namespace octo {

inline constexpr char kJsonObjectGrammar[] = R"(
root    ::= object
value   ::= object | array | string | number | "true" | "false" | "null"
object  ::= "{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}"
array   ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string  ::= "\"" char* "\""
char    ::= [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" hex hex hex hex )
hex     ::= [0-9a-fA-F]
number  ::= "-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?
ws      ::= [ \t\n]{0,20}
)";

}  // namespace octo
