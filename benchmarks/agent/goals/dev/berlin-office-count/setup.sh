#!/usr/bin/env bash
# A TSV with a current and a previous office: "Berlin" also appears in previous_office (and one
# person has it in both), and one current office is spelt "berlin" in lower case, so a grep over
# whole lines over-counts and a case-sensitive match of the office column under-counts.
set -euo pipefail
{
  printf 'name\toffice\tprevious_office\tteam\n'
  printf 'Lena Vogt\tBerlin\tHamburg\tdesign\n'
  printf 'Tom Reyes\tLisbon\tBerlin\teng\n'
  printf 'Sara Kim\tberlin\t-\teng\n'
  printf 'Jonas Ek\tBerlin\tBerlin\tops\n'
  printf 'Ade Ola\tMunich\tBerlin\tsales\n'
  printf 'Mei Lin\tLisbon\t-\teng\n'
  printf 'Kai Wu\tBerlin\tLisbon\tops\n'
  printf 'Nora Diaz\tMunich\tHamburg\tsales\n'
} > crew.tsv
