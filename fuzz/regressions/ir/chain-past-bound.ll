define void @main() !dbg !1 {
  call void @c0(), !dbg !2
  call void @c1(), !dbg !2
  call void @c2(), !dbg !2
  call void @c3(), !dbg !2
  call void @c4(), !dbg !2
  call void @c5(), !dbg !2
  call void @c6(), !dbg !2
  call void @c7(), !dbg !2
  call void @c8(), !dbg !2
  call void @c9(), !dbg !2
  call void @c10(), !dbg !2
  call void @c11(), !dbg !2
  call void @c12(), !dbg !2
  call void @c13(), !dbg !2
  call void @c14(), !dbg !2
  call void @c15(), !dbg !2
  call void @c16(), !dbg !2
  call void @c17(), !dbg !2
  call void @c18(), !dbg !2
  call void @c19(), !dbg !2
  call void @c20(), !dbg !2
  call void @c21(), !dbg !2
  call void @c22(), !dbg !2
  call void @c23(), !dbg !2
  call void @c24(), !dbg !2
  call void @c25(), !dbg !2
  call void @c26(), !dbg !2
  call void @c27(), !dbg !2
  call void @c28(), !dbg !2
  call void @c29(), !dbg !2
  call void @c30(), !dbg !2
  call void @c31(), !dbg !2
  call void @c32(), !dbg !2
  call void @c33(), !dbg !2
  call void @c34(), !dbg !2
  call void @c35(), !dbg !2
  call void @c36(), !dbg !2
  call void @c37(), !dbg !2
  call void @c38(), !dbg !2
  call void @c39(), !dbg !2
  call void @c40(), !dbg !2
  call void @c41(), !dbg !2
  call void @c42(), !dbg !2
  call void @c43(), !dbg !2
  call void @c44(), !dbg !2
  call void @c45(), !dbg !2
  call void @c46(), !dbg !2
  call void @c47(), !dbg !2
  call void @c48(), !dbg !2
  call void @c49(), !dbg !2
  call void @c50(), !dbg !2
  call void @c51(), !dbg !2
  call void @c52(), !dbg !2
  call void @c53(), !dbg !2
  call void @c54(), !dbg !2
  call void @c55(), !dbg !2
  call void @c56(), !dbg !2
  call void @c57(), !dbg !2
  call void @c58(), !dbg !2
  call void @c59(), !dbg !2
  call void @c60(), !dbg !2
  call void @c61(), !dbg !2
  call void @c62(), !dbg !2
  call void @c63(), !dbg !2
  call void @c64(), !dbg !2
  call void @c65(), !dbg !2
  call void @c66(), !dbg !2
  call void @c67(), !dbg !2
  call void @c68(), !dbg !2
  call void @c69(), !dbg !2
  call void @c70(), !dbg !2
  call void @c71(), !dbg !2
  call void @c72(), !dbg !2
  call void @c73(), !dbg !2
  call void @c74(), !dbg !2
  call void @c75(), !dbg !2
  call void @c76(), !dbg !2
  call void @c77(), !dbg !2
  call void @c78(), !dbg !2
  call void @c79(), !dbg !2
  call void @c80(), !dbg !2
  call void @c81(), !dbg !2
  call void @c82(), !dbg !2
  call void @c83(), !dbg !2
  call void @c84(), !dbg !2
  call void @c85(), !dbg !2
  call void @c86(), !dbg !2
  call void @c87(), !dbg !2
  call void @c88(), !dbg !2
  call void @c89(), !dbg !2
  call void @c90(), !dbg !2
  call void @c91(), !dbg !2
  call void @c92(), !dbg !2
  call void @c93(), !dbg !2
  call void @c94(), !dbg !2
  call void @c95(), !dbg !2
  call void @c96(), !dbg !2
  call void @c97(), !dbg !2
  call void @c98(), !dbg !2
  call void @c99(), !dbg !2
  call void @loop(), !dbg !999
  ret void
}
!1 = distinct !DISubprogram(name: "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", line: 1)
!2 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !3)
!3 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !4)
!4 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !5)
!5 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !6)
!6 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !7)
!7 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !8)
!8 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !9)
!9 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !10)
!10 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !11)
!11 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !12)
!12 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !13)
!13 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !14)
!14 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !15)
!15 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !16)
!16 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !17)
!17 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !18)
!18 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !19)
!19 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !20)
!20 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !21)
!21 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !22)
!22 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !23)
!23 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !24)
!24 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !25)
!25 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !26)
!26 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !27)
!27 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !28)
!28 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !29)
!29 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !30)
!30 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !31)
!31 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !32)
!32 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !33)
!33 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !34)
!34 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !35)
!35 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !36)
!36 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !37)
!37 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !38)
!38 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !39)
!39 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !40)
!40 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !41)
!41 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !42)
!42 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !43)
!43 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !44)
!44 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !45)
!45 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !46)
!46 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !47)
!47 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !48)
!48 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !49)
!49 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !50)
!50 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !51)
!51 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !52)
!52 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !53)
!53 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !54)
!54 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !55)
!55 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !56)
!56 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !57)
!57 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !58)
!58 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !59)
!59 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !60)
!60 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !61)
!61 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !62)
!62 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !63)
!63 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !64)
!64 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !65)
!65 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !66)
!66 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !67)
!67 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !68)
!68 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !69)
!69 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !70)
!70 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !71)
!71 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !72)
!72 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !73)
!73 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !74)
!74 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !75)
!75 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !76)
!76 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !77)
!77 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !78)
!78 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !79)
!79 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !80)
!80 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !81)
!81 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !82)
!82 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !83)
!83 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !84)
!84 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !85)
!85 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !86)
!86 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !87)
!87 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !88)
!88 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !89)
!89 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !90)
!90 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !91)
!91 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !92)
!92 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !93)
!93 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !94)
!94 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !95)
!95 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !96)
!96 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !97)
!97 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !98)
!98 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !99)
!99 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !100)
!100 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !101)
!101 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !102)
!102 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !103)
!103 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !104)
!104 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !105)
!105 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !106)
!106 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !107)
!107 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !108)
!108 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !109)
!109 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !110)
!110 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !111)
!111 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !112)
!112 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !113)
!113 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !114)
!114 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !115)
!115 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !116)
!116 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !117)
!117 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !118)
!118 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !119)
!119 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !120)
!120 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !121)
!121 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !122)
!122 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !123)
!123 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !124)
!124 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !125)
!125 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !126)
!126 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !127)
!127 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !128)
!128 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !129)
!129 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !130)
!130 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !131)
!131 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !132)
!132 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !133)
!133 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !134)
!134 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !135)
!135 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !136)
!136 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !137)
!137 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !138)
!138 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !139)
!139 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !140)
!140 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !141)
!141 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !142)
!142 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !143)
!143 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !144)
!144 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !145)
!145 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !146)
!146 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !147)
!147 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !148)
!148 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !149)
!149 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !150)
!150 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !151)
!151 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !152)
!152 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !153)
!153 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !154)
!154 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !155)
!155 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !156)
!156 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !157)
!157 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !158)
!158 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !159)
!159 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !160)
!160 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !161)
!161 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !162)
!162 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !163)
!163 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !164)
!164 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !165)
!165 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !166)
!166 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !167)
!167 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !168)
!168 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !169)
!169 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !170)
!170 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !171)
!171 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !172)
!172 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !173)
!173 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !174)
!174 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !175)
!175 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !176)
!176 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !177)
!177 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !178)
!178 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !179)
!179 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !180)
!180 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !181)
!181 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !182)
!182 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !183)
!183 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !184)
!184 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !185)
!185 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !186)
!186 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !187)
!187 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !188)
!188 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !189)
!189 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !190)
!190 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !191)
!191 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !192)
!192 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !193)
!193 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !194)
!194 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !195)
!195 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !196)
!196 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !197)
!197 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !198)
!198 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !199)
!199 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !200)
!200 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !201)
!201 = !DILocation(line: 3, column: 1, scope: !1)
!999 = !DILocation(line: 3, column: 1, scope: !1, inlinedAt: !999)
