/* placeholder until its module lands */
typedef int sl_placeholder_check;
